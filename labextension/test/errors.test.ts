import { describe, expect, it } from 'vitest';

import { ERROR_MIME } from '../src/api';
import { carriedError } from '../src/errors';

describe('carriedError', () => {
  it('reads the error a background cell’s failure carries', () => {
    const data = {
      [ERROR_MIME]: {
        ename: 'ValueError',
        evalue: 'bad batch',
        traceback: ['taskcell: broken: failed', 'ValueError: bad batch']
      },
      'text/plain': 'taskcell: broken: failed'
    };
    expect(carriedError(data)).toEqual({
      ename: 'ValueError',
      evalue: 'bad batch',
      traceback: ['taskcell: broken: failed', 'ValueError: bad batch']
    });
  });

  it('leaves every other output alone', () => {
    expect(carriedError({ 'text/plain': 'done' })).toBeNull();
    expect(carriedError(null)).toBeNull();
    expect(carriedError({ [ERROR_MIME]: { ename: 'E' } })).toBeNull();
  });
});
