/**
 * The cluster as the server's view says it: totals, workers, pools, what waits. Every word is the
 * view's (`taskcell/planner/view.py`, the notebook panel's too); this module only draws it.
 */
import React from 'react';

import {
  LEGEND_ASSIGNED,
  LEGEND_RUNNING,
  type IBarView,
  type IGroupView,
  type IPoolView,
  type ISnapshotView,
  type IStripView,
  type ITaskView,
  type IWorkerView
} from './api';
import { Ticking } from './hooks';
import type { SidebarModel } from './model';

/** What the sidebar asks the user, and opens, beyond the cluster's own view. */
export interface IActions {
  /** Ask before something is stopped; resolves to the user's yes. */
  confirm(title: string, body: string, accept: string): Promise<boolean>;
  /** Show what a task printed and raised. */
  showOutput(model: SidebarModel, key: string, name: string): void;
  /** Open one of the dashboard's plots as a JupyterLab panel. */
  openPlot(title: string, url: string): void;
}

/**
 * One resource as a bar: a solid part for what running tasks hold, a hatched part for what
 * tasks assigned to the worker and still waiting there will take.
 */
export function Bar(props: {
  view: IBarView;
  children?: React.ReactNode;
}): JSX.Element {
  const { view } = props;
  return (
    <div
      className="jp-taskcell-resource"
      data-resource={view.resource}
      data-running={String(view.running)}
      data-assigned={String(view.assigned)}
      data-total={String(view.total)}
    >
      <span className="jp-taskcell-resource-name" title={view.resource}>
        {view.resource}
      </span>
      <div
        className={`jp-taskcell-bar${view.oversubscribed ? ' jp-taskcell-bar-oversubscribed' : ''}`}
        role="meter"
        aria-valuemin={0}
        aria-valuemax={view.total}
        aria-valuenow={view.running}
        title={view.title}
      >
        <div
          className="jp-taskcell-bar-running"
          style={{ width: `${(view.running_share * 100).toFixed(1)}%` }}
        />
        <div
          className="jp-taskcell-bar-assigned"
          style={{ width: `${(view.assigned_share * 100).toFixed(1)}%` }}
        />
      </div>
      <span className="jp-taskcell-resource-label">{view.label}</span>
      {props.children}
    </div>
  );
}

/** What the solid and the hatched parts of a bar stand for. */
export function Legend(): JSX.Element {
  return (
    <div className="jp-taskcell-legend">
      {[
        ['running', LEGEND_RUNNING],
        ['assigned', LEGEND_ASSIGNED]
      ].map(([part, words]) => (
        <span
          key={part}
          className={`jp-taskcell-legend-item jp-taskcell-legend-${part}`}
        >
          <span className={`jp-taskcell-swatch jp-taskcell-bar-${part}`} />
          <span>{words}</span>
        </span>
      ))}
    </div>
  );
}

/** A resource's last minutes: one column per step, as high as the share running tasks held. */
export function Strip(props: { view: IStripView }): JSX.Element {
  const { view } = props;
  return (
    <div
      className="jp-taskcell-strip"
      data-resource={view.resource}
      title={view.title}
      role="img"
      aria-label={view.title}
    >
      {view.shares.map((share, i) => (
        <span
          key={i}
          className={share === null ? 'jp-taskcell-strip-unknown' : ''}
          style={{ height: `${((share ?? 0) * 100).toFixed(0)}%` }}
        />
      ))}
    </div>
  );
}

/** A task's line; `where` only outside its worker's box; a Cancel button. */
function Task(props: {
  model: SidebarModel;
  task: ITaskView;
  where: boolean;
}): JSX.Element {
  const { model, task } = props;
  const busy = model.cancelling.has(task.key);
  return (
    <li
      className={`jp-taskcell-task jp-taskcell-task-${task.state}`}
      data-key={task.key}
      title={task.key}
    >
      <span className="jp-taskcell-task-name">{task.name}</span>
      <span className="jp-taskcell-task-request">{task.request}</span>
      {props.where && (
        <span className="jp-taskcell-task-where">{task.where}</span>
      )}
      <Ticking
        model={model}
        label={task.waited}
        className="jp-taskcell-task-waited"
      />
      <button
        type="button"
        className="jp-taskcell-cancel"
        disabled={busy}
        title={`Cancel ${task.name}: stop it on its worker, or before it starts`}
        aria-label={`Cancel ${task.name}`}
        onClick={() => void model.cancel(task.key)}
      >
        {busy ? 'Cancelling…' : 'Cancel'}
      </button>
      {task.waiting_for && (
        <span className="jp-taskcell-task-reason">{task.waiting_for}</span>
      )}
    </li>
  );
}

function Tasks(props: {
  model: SidebarModel;
  tasks: ITaskView[];
  where: boolean;
}): JSX.Element {
  return (
    <ul className="jp-taskcell-tasks">
      {props.tasks.map(task => (
        <Task
          key={task.key}
          model={props.model}
          task={task}
          where={props.where}
        />
      ))}
    </ul>
  );
}

function Worker(props: {
  model: SidebarModel;
  worker: IWorkerView;
}): JSX.Element {
  const { worker } = props;
  const counts = [worker.more_running, worker.waiting]
    .filter(Boolean)
    .join(' · ');
  return (
    <div
      className={`jp-taskcell-worker${worker.busy ? ' jp-taskcell-worker-busy' : ''}`}
      data-address={worker.address}
      data-name={worker.name}
    >
      <div className="jp-taskcell-worker-head" title={worker.address}>
        {worker.name}
      </div>
      {worker.bars.map(bar => (
        <Bar key={bar.resource} view={bar} />
      ))}
      {worker.running.length > 0 && (
        <Tasks model={props.model} tasks={worker.running} where={false} />
      )}
      {counts ? (
        <p className="jp-taskcell-more">{counts}</p>
      ) : (
        worker.running.length === 0 && <p className="jp-taskcell-empty">idle</p>
      )}
    </div>
  );
}

function Group(props: { model: SidebarModel; group: IGroupView }): JSX.Element {
  const { group } = props;
  return (
    <div className="jp-taskcell-group">
      <h4 className="jp-taskcell-group-title">{group.title}</h4>
      {group.workers.map(w => (
        <Worker key={w.address} model={props.model} worker={w} />
      ))}
      {group.folded && (
        <p className="jp-taskcell-more jp-taskcell-folded">{group.folded}</p>
      )}
    </div>
  );
}

/**
 * A pool: its title, shape and counts, a button that starts one more worker (while fewer than
 * its max-workers are up), then each worker it started, with a Retire button.
 */
function Pool(props: {
  model: SidebarModel;
  pool: IPoolView;
  actions: IActions;
}): JSX.Element {
  const { model, pool, actions } = props;
  const retire = async (name: string, address: string): Promise<void> => {
    const body =
      `Retire ${name} (${address}) of pool ${pool.name}? Its results move to other workers, ` +
      'then its process stops; a task running there is stopped.';
    if (await actions.confirm('Retire the worker?', body, 'Retire')) {
      await model.retire(address);
    }
  };
  return (
    <div
      className="jp-taskcell-pool"
      data-name={pool.name}
      data-kernel={pool.kernel}
    >
      <h4 className="jp-taskcell-pool-title">{pool.title}</h4>
      <p className="jp-taskcell-pool-shape">{pool.shape}</p>
      <p className="jp-taskcell-more jp-taskcell-pool-detail">{pool.detail}</p>
      <button
        type="button"
        className="jp-taskcell-start-worker jp-mod-styled"
        disabled={model.busy || !pool.startable}
        title={
          pool.startable
            ? `Start one more worker of pool ${pool.name}; it retires once idle`
            : `All the workers pool ${pool.name} may have are up (max-workers)`
        }
        onClick={() => void model.startWorker(pool.kernel, pool.name)}
      >
        Start a worker
      </button>
      <ul className="jp-taskcell-pool-workers">
        {pool.workers.map(w => (
          <li
            key={w.name}
            className={`jp-taskcell-pool-worker jp-taskcell-pool-worker-${w.state}`}
            data-name={w.name}
            data-state={w.state}
            title={w.title}
          >
            <span className="jp-taskcell-pool-worker-name">{w.name}</span>
            <Ticking
              model={model}
              label={w.label}
              className="jp-taskcell-pool-worker-state"
            />
            {w.state === 'running' && w.address && (
              <button
                type="button"
                className="jp-taskcell-retire"
                disabled={model.busy}
                title={`Retire ${w.name}: move its results, then stop it`}
                onClick={() => void retire(w.name, w.address!)}
              >
                Retire
              </button>
            )}
          </li>
        ))}
      </ul>
    </div>
  );
}

/** Totals, workers, pools and what waits, as the view says. */
export function Occupancy(props: {
  model: SidebarModel;
  view: ISnapshotView;
  actions: IActions;
}): JSX.Element {
  const { model, view, actions } = props;
  return (
    <>
      <section className="jp-taskcell-totals">
        <p className="jp-taskcell-summary">{view.summary}</p>
        <Legend />
        {view.totals.map((bar, i) => (
          <Bar key={bar.resource} view={bar}>
            <Strip view={view.strips[i]} />
          </Bar>
        ))}
      </section>
      <section className="jp-taskcell-workers">
        {view.no_workers && (
          <p className="jp-taskcell-empty">{view.no_workers}</p>
        )}
        {view.groups.map((group, i) => (
          <Group
            key={`${i}:${group.resources.join()}`}
            model={model}
            group={group}
          />
        ))}
      </section>
      {view.pools.length > 0 && (
        <section className="jp-taskcell-pools">
          <h3 className="jp-taskcell-heading">{view.pools_title}</h3>
          {view.pools.map(pool => (
            <Pool
              key={`${pool.kernel}/${pool.name}`}
              model={model}
              pool={pool}
              actions={actions}
            />
          ))}
        </section>
      )}
      <section className="jp-taskcell-queue">
        <h3 className="jp-taskcell-heading">{view.waiting_title}</h3>
        {view.waiting.length > 0 && (
          <Tasks model={model} tasks={view.waiting} where={true} />
        )}
        {view.waiting_note && (
          <p
            className={
              view.waiting.length ? 'jp-taskcell-more' : 'jp-taskcell-empty'
            }
          >
            {view.waiting_note}
          </p>
        )}
      </section>
    </>
  );
}
