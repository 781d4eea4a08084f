/**
 * The scheduler's clock in the browser: durations tick every second between updates.
 *
 * The server sends every time on the scheduler's clock, and the scheduler's time as it answered
 * (`IClusterState.now`); the browser keeps the offset of its own clock to that, and writes a
 * `ITicking` label as `before + duration(now - since) + after`. Only clocks tick here: every
 * word comes from the server (`taskcell/planner/view.py`).
 */
import type { ITicking } from './generated';

/** `75` -> `"1m15s"`; `4000` -> `"1h06m"`; never negative (`duration` in view.py). */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const pad = (n: number): string => String(n).padStart(2, '0');
  if (s < 60) {
    return `${s}s`;
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)}m${pad(s % 60)}s`;
  }
  return `${Math.floor(s / 3600)}h${pad(Math.floor((s % 3600) / 60))}m`;
}

/** A ticking label's words at `now` (the scheduler's clock). */
export function tickText(label: ITicking, now: number): string {
  if (label.since === null) {
    return label.text;
  }
  return `${label.before}${duration(now - label.since)}${label.after}`;
}

/** The scheduler's time, read from the browser's clock and the offset of the last answer. */
export class SchedulerClock {
  /** Take the scheduler's time `schedulerNow` as of now (an answer just received). */
  set(schedulerNow: number, browserNow: number = Date.now() / 1000): void {
    this._offset = schedulerNow - browserNow;
  }

  /** The scheduler's time now, in Unix seconds. */
  now(browserNow: number = Date.now() / 1000): number {
    return browserNow + this._offset;
  }

  private _offset = 0;
}
