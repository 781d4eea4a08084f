import { describe, expect, it } from 'vitest';

import { SchedulerClock, duration, tickText } from '../src/clock';

describe('duration', () => {
  it.each([
    [0, '0s'],
    [59.9, '59s'],
    [75, '1m15s'],
    [3599, '59m59s'],
    [4000, '1h06m'],
    [-3, '0s']
  ])('%s s reads %s, as view.py writes it', (seconds, text) => {
    expect(duration(seconds)).toBe(text);
  });
});

describe('a ticking label', () => {
  const label = {
    text: 'gpu-box · 4.2s · 2s ago',
    since: 1000,
    before: 'gpu-box · 4.2s · ',
    after: ' ago'
  };

  it('grows with the clock around the words the server wrote', () => {
    expect(tickText(label, 1002)).toBe('gpu-box · 4.2s · 2s ago');
    expect(tickText(label, 1075)).toBe('gpu-box · 4.2s · 1m15s ago');
  });

  it('keeps fixed words as they are', () => {
    expect(
      tickText(
        { text: 'running', since: null, before: 'running', after: '' },
        5000
      )
    ).toBe('running');
  });
});

describe('the scheduler clock', () => {
  it('reads the scheduler time from the browser clock and the offset of the last answer', () => {
    const clock = new SchedulerClock();
    clock.set(1_000_000, 2_000_000); // the scheduler is 1e6 s behind this browser
    expect(clock.now(2_000_010)).toBe(1_000_010);
  });
});
