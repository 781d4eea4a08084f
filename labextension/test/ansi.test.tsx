// @vitest-environment happy-dom
import React, { act } from 'react';
import { createRoot } from 'react-dom/client';
import { describe, expect, it, vi } from 'vitest';

import { OutputBody } from '../src/actions';
import { ansiRuns, overwritten } from '../src/ansi';

(
  globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }
).IS_REACT_ACT_ENVIRONMENT = true;

// The dialog's body alone: JupyterLab's widgets bring web components happy-dom cannot style.
vi.mock('@jupyterlab/ui-components', () => ({ IFrame: class {} }));
vi.mock('@jupyterlab/apputils', () => ({}));

describe('overwritten', () => {
  it('leaves a progress bar at its last redraw', () => {
    const bar = (n: number) =>
      `\r${n * 10}%|${'#'.repeat(n)}${' '.repeat(10 - n)}|`;
    const text = [0, 3, 7, 10].map(bar).join('') + '\ndone\n';
    expect(overwritten(text)).toBe('100%|##########|\ndone\n');
  });

  it('overwrites only as far as the new text goes, as a terminal', () => {
    expect(overwritten('abcdef\rXY')).toBe('XYcdef');
    expect(overwritten('abc\r')).toBe('abc');
    expect(overwritten('one\r\ntwo')).toBe('one\ntwo');
  });

  it('keeps the look of what was not overwritten', () => {
    expect(ansiRuns('\x1b[31mabc\x1b[0m\rX')).toEqual([
      { text: 'X', classes: [], style: {} },
      { text: 'bc', classes: ['ansi-red-fg'], style: {} }
    ]);
  });
});

describe('ansiRuns', () => {
  it('colours as JupyterLab does and drops other escapes', () => {
    const runs = ansiRuns('a\x1b[1;31mB\x1b[0m\x1b[Kc\x1b[38;2;1;2;3md');
    expect(runs).toEqual([
      { text: 'a', classes: [], style: {} },
      { text: 'B', classes: ['ansi-red-intense-fg', 'ansi-bold'], style: {} },
      { text: 'c', classes: [], style: {} },
      { text: 'd', classes: [], style: { color: 'rgb(1, 2, 3)' } }
    ]);
  });

  it('reads 256 colours and backgrounds', () => {
    const [run] = ansiRuns('\x1b[38;5;196;44mx');
    expect(run.classes).toEqual(['ansi-blue-bg']);
    expect(run.style).toEqual({ color: 'rgb(255, 0, 0)' });
  });
});

describe('OutputBody', () => {
  it('shows a task output as a terminal would', async () => {
    const host = document.createElement('div');
    const root = createRoot(host);
    await act(async () =>
      root.render(
        <OutputBody
          output={{
            key: 'cell-1-abc',
            worker: 'tcp://127.0.0.1:1',
            text: '\r 10%|#  |\r100%|###|\nok \x1b[32mgreen\x1b[0m\n',
            truncated: false,
            error: '\x1b[31mValueError\x1b[0m: bad'
          }}
        />
      )
    );
    const text = host.querySelector('.jp-taskcell-output-text');
    expect(text?.textContent).toBe('100%|###|\nok green\n');
    expect(text?.querySelector('.ansi-green-fg')?.textContent).toBe('green');
    const error = host.querySelector('.jp-taskcell-output-error');
    expect(error?.textContent).toBe('ValueError: bad');
    expect(error?.querySelector('.ansi-red-fg')?.textContent).toBe(
      'ValueError'
    );
    act(() => root.unmount());
  });
});
