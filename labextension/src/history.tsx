/**
 * The tasks that ended, to search and filter, each one's output a click away; and a timeline of
 * each worker's tasks over the last minutes, coloured by cell. The view (`view.py`) says what
 * ended and when; the browser filters the list and places the bars by the ticking clock.
 */
import React, { useState } from 'react';

import {
  CELL_PALETTE,
  type IEndedView,
  type ISnapshotView,
  type ITimelineView
} from './api';
import { Ticking, useNow } from './hooks';
import type { SidebarModel } from './model';
import type { IActions } from './occupancy';

/** The filters the user set: free text, and a cell, a state, a worker ('' for any). */
interface IFilter {
  text: string;
  cell: string;
  state: string;
  worker: string;
}

const ANY: IFilter = { text: '', cell: '', state: '', worker: '' };

/** Whether `task` passes `filter`: the text is looked for in its name, key, worker and error. */
export function passes(task: IEndedView, filter: IFilter): boolean {
  const text = filter.text.trim().toLowerCase();
  const haystack = [task.name, task.key, task.worker, task.error ?? '']
    .join('\n')
    .toLowerCase();
  return (
    (!text || haystack.includes(text)) &&
    (!filter.cell || task.name === filter.cell) &&
    (!filter.state || task.state === filter.state) &&
    (!filter.worker || task.worker === filter.worker)
  );
}

function Choice(props: {
  label: string;
  value: string;
  options: readonly string[];
  onChange: (value: string) => void;
}): JSX.Element {
  return (
    <select
      className={`jp-taskcell-filter-${props.label} jp-mod-styled`}
      aria-label={`Filter by ${props.label}`}
      value={props.value}
      onChange={e => props.onChange(e.target.value)}
    >
      <option value="">any {props.label}</option>
      {props.options.map(o => (
        <option key={o} value={o}>
          {o}
        </option>
      ))}
    </select>
  );
}

function EndedTask(props: {
  model: SidebarModel;
  task: IEndedView;
  actions: IActions;
}): JSX.Element {
  const { model, task, actions } = props;
  return (
    <li
      className={`jp-taskcell-task jp-taskcell-ended-task jp-taskcell-ended-${task.state}`}
      data-key={task.key}
      data-state={task.state}
      title={task.key}
    >
      <span className="jp-taskcell-task-name">{task.name}</span>
      <span className="jp-taskcell-ended-state">{task.state}</span>
      <Ticking
        model={model}
        label={task.detail}
        className="jp-taskcell-ended-detail"
      />
      <button
        type="button"
        className="jp-taskcell-output"
        title={`What ${task.name} printed and raised`}
        onClick={() => actions.showOutput(model, task.key, task.name)}
      >
        Output
      </button>
      {task.error && (
        <span className="jp-taskcell-ended-error">{task.error}</span>
      )}
    </li>
  );
}

/** The ended tasks, with a search box and filters by cell, state and worker. */
export function Ended(props: {
  model: SidebarModel;
  view: ISnapshotView;
  actions: IActions;
}): JSX.Element {
  const { model, view, actions } = props;
  const [filter, setFilter] = useState<IFilter>(ANY);
  const shown = view.ended.filter(t => passes(t, filter));
  const set = (part: Partial<IFilter>): void =>
    setFilter({ ...filter, ...part });
  const filters = view.ended_filters;
  return (
    <section className="jp-taskcell-ended">
      <h3 className="jp-taskcell-heading">{view.ended_title}</h3>
      {view.ended.length > 0 && (
        <div className="jp-taskcell-filters">
          <input
            type="search"
            className="jp-taskcell-search jp-mod-styled"
            placeholder="Search ended tasks"
            aria-label="Search ended tasks"
            value={filter.text}
            onChange={e => set({ text: e.target.value })}
          />
          <Choice
            label="cell"
            value={filter.cell}
            options={filters.cells}
            onChange={cell => set({ cell })}
          />
          <Choice
            label="state"
            value={filter.state}
            options={filters.states}
            onChange={state => set({ state })}
          />
          <Choice
            label="worker"
            value={filter.worker}
            options={filters.workers}
            onChange={worker => set({ worker })}
          />
        </div>
      )}
      {shown.length > 0 && (
        <ul className="jp-taskcell-tasks">
          {shown.map(task => (
            <EndedTask
              key={task.key}
              model={model}
              task={task}
              actions={actions}
            />
          ))}
        </ul>
      )}
      {view.ended.length > 0 && shown.length === 0 && (
        <p className="jp-taskcell-empty jp-taskcell-no-match">
          No ended task matches.
        </p>
      )}
      {view.ended_note && (
        <p className="jp-taskcell-empty">{view.ended_note}</p>
      )}
    </section>
  );
}

/** Each worker's tasks over the last minutes, placed by the scheduler's clock as it ticks. */
export function Timeline(props: {
  model: SidebarModel;
  timeline: ITimelineView;
}): JSX.Element {
  const { model, timeline } = props;
  const now = useNow(model);
  const start = now - timeline.seconds;
  const place = (from: number, to: number | null): React.CSSProperties => {
    const left = Math.max(0, (from - start) / timeline.seconds);
    const right = Math.min(1, ((to ?? now) - start) / timeline.seconds);
    return {
      left: `${(left * 100).toFixed(2)}%`,
      width: `${(Math.max(0, right - left) * 100).toFixed(2)}%`
    };
  };
  return (
    <section className="jp-taskcell-timeline">
      <h3 className="jp-taskcell-heading">
        Timeline, last {Math.round(timeline.seconds / 60)} min
      </h3>
      {timeline.note && <p className="jp-taskcell-empty">{timeline.note}</p>}
      {timeline.rows.map(row => (
        <div
          key={row.address}
          className="jp-taskcell-timeline-row"
          data-worker={row.worker}
        >
          <span className="jp-taskcell-timeline-worker" title={row.address}>
            {row.worker}
          </span>
          <div className="jp-taskcell-timeline-track">
            {row.spans.map(span => (
              <span
                key={span.key}
                className={`jp-taskcell-span jp-taskcell-span-${span.state}`}
                data-key={span.key}
                data-cell={span.name}
                title={span.title}
                style={{
                  ...place(span.start, span.end),
                  background: CELL_PALETTE[span.color]
                }}
              />
            ))}
          </div>
        </div>
      ))}
      {timeline.more && <p className="jp-taskcell-more">{timeline.more}</p>}
      {timeline.cells.length > 0 && (
        <div className="jp-taskcell-timeline-legend">
          {timeline.cells.map(cell => (
            <span
              key={cell.name}
              className="jp-taskcell-legend-item"
              data-cell={cell.name}
            >
              <span
                className="jp-taskcell-swatch"
                style={{ background: CELL_PALETTE[cell.color] }}
              />
              <span>{cell.name}</span>
            </span>
          ))}
        </div>
      )}
    </section>
  );
}
