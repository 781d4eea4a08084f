/**
 * React glue: redraw on a Lumino signal, tick with the scheduler's clock.
 *
 * The sidebar is React, so an update patches the DOM in place: focus, selection and hover
 * survive it. Only the labels that hold a duration redraw every second (`Ticking`).
 */
import type { ISignal } from '@lumino/signaling';
import React, { useEffect, useState } from 'react';

import type { ITicking } from './api';
import { tickText } from './clock';
import type { SidebarModel } from './model';

/** Redraw the calling component whenever `signal` is emitted. */
export function useSignal(signal: ISignal<unknown, unknown>): void {
  const [, setCount] = useState(0);
  useEffect(() => {
    const redraw = (): void => setCount(n => n + 1);
    signal.connect(redraw);
    return () => {
      signal.disconnect(redraw);
    };
  }, [signal]);
}

/** The scheduler's time now; the calling component redraws every second. */
export function useNow(model: SidebarModel): number {
  useSignal(model.ticked);
  return model.clock.now();
}

/** A label that holds a growing duration, rewritten every second. */
export function Ticking(props: {
  model: SidebarModel;
  label: ITicking;
  className: string;
}): JSX.Element {
  const now = useNow(props.model);
  const { label } = props;
  return (
    <span className={props.className} data-since={label.since ?? undefined}>
      {tickText(label, now)}
    </span>
  );
}
