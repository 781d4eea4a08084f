/**
 * Terminal text as a terminal shows it: ANSI SGR colours, bold and underline as the classes
 * JupyterLab's own text outputs use (`.jp-RenderedText pre .ansi-red-fg`, ...), other escape
 * sequences dropped, and a `\r` going back to the line's start, what follows overwriting what
 * was there (a progress bar's redraws leave its last state).
 */
import React from 'react';

const NAMES = [
  'black',
  'red',
  'green',
  'yellow',
  'blue',
  'magenta',
  'cyan',
  'white'
];

/** A run of text and how it is drawn. */
export interface IAnsiRun {
  text: string;
  classes: string[];
  style: React.CSSProperties;
}

interface IPen {
  fg: string | number | null; // a colour index 0-15, a CSS colour, or the default
  bg: string | number | null;
  bold: boolean;
  underline: boolean;
}

// eslint-disable-next-line no-control-regex
const ESCAPE = /\x1b\[([0-?]*)[ -/]*([@-~])|\x1b[@-_]?/g;

/** `text`, cut into runs of one look each, as a terminal leaves it: a `\r` returns to the
 * line's start, and each character written then takes the place and look of the one there. */
export function ansiRuns(text: string): IAnsiRun[] {
  const runs: IAnsiRun[] = [];
  const pen: IPen = { fg: null, bg: null, bold: false, underline: false };
  const lines = text.replace(/\r\n/g, '\n').split('\n');
  lines.forEach((line, i) => {
    const screen: IAnsiRun[] = [];
    let column = 0;
    const write = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === '\r') {
          column = 0;
        } else {
          screen[column++] = { text: ch, ...look(pen) };
        }
      }
    };
    let at = 0;
    for (const match of line.matchAll(ESCAPE)) {
      write(line.slice(at, match.index));
      at = (match.index ?? 0) + match[0].length;
      if (match[2] === 'm') {
        apply(pen, match[1]);
      }
    }
    write(line.slice(at));
    if (i < lines.length - 1) {
      screen.push({ text: '\n', classes: [], style: {} });
    }
    for (const cell of screen) {
      const last = runs[runs.length - 1];
      if (last && sameLook(last, cell)) {
        last.text += cell.text;
      } else {
        runs.push({ ...cell });
      }
    }
  });
  return runs;
}

/** `text` as a terminal shows it, without its colours. */
export function overwritten(text: string): string {
  return ansiRuns(text)
    .map(run => run.text)
    .join('');
}

function sameLook(a: IAnsiRun, b: IAnsiRun): boolean {
  return (
    a.classes.join(' ') === b.classes.join(' ') &&
    JSON.stringify(a.style) === JSON.stringify(b.style)
  );
}

function apply(pen: IPen, params: string): void {
  const codes = (params || '0').split(';').map(n => parseInt(n || '0', 10));
  while (codes.length) {
    const code = codes.shift() as number;
    if (code === 0) {
      Object.assign(pen, { fg: null, bg: null, bold: false, underline: false });
    } else if (code === 1) {
      pen.bold = true;
    } else if (code === 4) {
      pen.underline = true;
    } else if (code === 22) {
      pen.bold = false;
    } else if (code === 24) {
      pen.underline = false;
    } else if (code >= 30 && code <= 37) {
      pen.fg = code - 30;
    } else if (code >= 90 && code <= 97) {
      pen.fg = code - 90 + 8;
    } else if (code >= 40 && code <= 47) {
      pen.bg = code - 40;
    } else if (code >= 100 && code <= 107) {
      pen.bg = code - 100 + 8;
    } else if (code === 39) {
      pen.fg = null;
    } else if (code === 49) {
      pen.bg = null;
    } else if (code === 38 || code === 48) {
      const colour = extended(codes);
      if (code === 38) {
        pen.fg = colour;
      } else {
        pen.bg = colour;
      }
    }
  }
}

/** The colour of `38;5;n` or `38;2;r;g;b` (the codes after 38 or 48, consumed). */
function extended(codes: number[]): string | number | null {
  const kind = codes.shift();
  if (kind === 2 && codes.length >= 3) {
    const [r, g, b] = codes.splice(0, 3);
    return `rgb(${r}, ${g}, ${b})`;
  }
  if (kind === 5 && codes.length >= 1) {
    const n = codes.shift() as number;
    if (n < 16) {
      return n;
    }
    if (n < 232) {
      const steps = [0, 95, 135, 175, 215, 255];
      const i = n - 16;
      return `rgb(${steps[Math.floor(i / 36)]}, ${steps[Math.floor(i / 6) % 6]}, ${steps[i % 6]})`;
    }
    const grey = 8 + (n - 232) * 10;
    return `rgb(${grey}, ${grey}, ${grey})`;
  }
  return null;
}

function look(pen: IPen): { classes: string[]; style: React.CSSProperties } {
  const classes: string[] = [];
  const style: React.CSSProperties = {};
  let fg = pen.fg;
  if (pen.bold && typeof fg === 'number' && fg < 8) {
    fg += 8; // as JupyterLab: bold text in the intense colours
  }
  for (const [colour, where] of [
    [fg, 'fg'],
    [pen.bg, 'bg']
  ] as const) {
    if (typeof colour === 'number') {
      const name = NAMES[colour % 8] + (colour >= 8 ? '-intense' : '');
      classes.push(`ansi-${name}-${where}`);
    } else if (colour) {
      style[where === 'fg' ? 'color' : 'backgroundColor'] = colour;
    }
  }
  if (pen.bold) {
    classes.push('ansi-bold');
  }
  if (pen.underline) {
    classes.push('ansi-underline');
  }
  return { classes, style };
}

/** `text` in a `<pre>` as a terminal shows it, in JupyterLab's output colours. */
export function AnsiText(props: {
  text: string;
  className: string;
}): JSX.Element {
  return (
    <div className="jp-RenderedText">
      <pre className={props.className}>
        {ansiRuns(props.text).map((run, i) =>
          run.classes.length || Object.keys(run.style).length ? (
            <span key={i} className={run.classes.join(' ')} style={run.style}>
              {run.text}
            </span>
          ) : (
            run.text
          )
        )}
      </pre>
    </div>
  );
}
