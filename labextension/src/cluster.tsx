/**
 * The cluster in the user's hands: which one is shown, how the server's link to it stands, the
 * Dask dashboard and its plots (through the Jupyter server), attaching the notebook in focus to
 * it, starting a cluster, scaling and stopping it (after asking).
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import React, { useEffect, useState } from 'react';

import type { IClusterState } from './api';
import { readReply } from './client';
import { clusterLabel, type SidebarModel } from './model';
import type { IActions } from './occupancy';

/** The plots the sidebar offers first, by the name Dask's `individual-plots.json` gives them. */
export const MAIN_PLOTS: ReadonlyArray<[string, string]> = [
  ['Individual Task Stream', 'Task stream'],
  ['Individual Progress', 'Progress'],
  ['Individual Workers Memory', 'Worker memory']
];

const STATUS_TEXT = {
  connecting: 'Connecting to the scheduler…',
  connected: 'Live',
  unreachable: 'Scheduler unreachable',
  error: 'No occupancy from this scheduler'
};

/** Why Attach is offered or not, as its tooltip says. */
function attachTitle(model: SidebarModel): string {
  if (model.clusterId === null) {
    return 'No cluster to attach a notebook to';
  }
  if (model.attached) {
    return 'The notebook in focus uses this cluster';
  }
  if (!model.context.hasKernel()) {
    return 'Open a notebook with a kernel to attach it to this cluster';
  }
  return 'Point the notebook in focus at this cluster: its kernel runs %task_cluster ADDRESS';
}

/**
 * The cluster selector (the notebook in focus's own cluster marked), a button that points that
 * notebook at the cluster shown ("Attached" where it uses it: the mark stays in view when a
 * narrow selector cuts its label off), and one that starts a cluster on the server.
 */
export function ClusterHeader(props: { model: SidebarModel }): JSX.Element {
  const { model } = props;
  const path = model.context.currentPath();
  return (
    <div className="jp-taskcell-header">
      <label className="jp-taskcell-label">
        Cluster
        <select
          className="jp-taskcell-cluster-select jp-mod-styled"
          disabled={model.clusters.length === 0}
          value={model.clusterId ?? ''}
          onChange={e => model.choose(e.target.value || null)}
        >
          {model.clusters.map(c => (
            <option key={c.id} value={c.id} title={c.address}>
              {clusterLabel(c, path)}
            </option>
          ))}
        </select>
      </label>
      <button
        type="button"
        className="jp-taskcell-attach jp-mod-styled"
        disabled={model.busy || !model.canAttach}
        title={attachTitle(model)}
        onClick={() => void model.attach()}
      >
        {model.attached ? 'Attached' : 'Attach'}
      </button>
      <button
        type="button"
        className="jp-taskcell-start jp-mod-styled"
        disabled={model.busy}
        title="Start a cluster of this machine's cores, memory and GPUs on the Jupyter server"
        onClick={() => void model.start()}
      >
        New cluster
      </button>
    </div>
  );
}

/** How the server's link to the cluster stands. */
export function StatusLine(props: { state: IClusterState }): JSX.Element {
  const { state } = props;
  return (
    <div
      className={`jp-taskcell-status jp-taskcell-status-${state.status}`}
      data-status={state.status}
      title={state.address}
    >
      <span className="jp-taskcell-status-text">
        {STATUS_TEXT[state.status]}
      </span>
      <span className="jp-taskcell-status-address">{state.address}</span>
      {state.message && (
        <span className="jp-taskcell-status-message">{state.message}</span>
      )}
    </div>
  );
}

/**
 * The dashboard's individual plots, by name, from the dashboard itself (through the server);
 * null until they are known, empty when it offers none.
 */
function usePlots(dashboard: string | null): Record<string, string> | null {
  const [plots, setPlots] = useState<Record<string, string> | null>(null);
  useEffect(() => {
    setPlots(null);
    if (!dashboard) {
      return;
    }
    let current = true;
    const settings = ServerConnection.makeSettings();
    const url = URLExt.join(
      serverUrl(dashboardRoot(dashboard)),
      'individual-plots.json'
    );
    Promise.resolve()
      .then(() => ServerConnection.makeRequest(url, {}, settings))
      .then(response => readReply<Record<string, string>>(response))
      .then(
        found => current && setPlots(found),
        () => current && setPlots({})
      );
    return () => {
      current = false;
    };
  }, [dashboard]);
  return plots;
}

/**
 * A path the server sent, relative to its base URL, as a URL of this page's server; a full URL
 * (a dashboard link the server could not relay) as it is.
 */
export function serverUrl(path: string): string {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(path)) {
    return path;
  }
  return URLExt.join(ServerConnection.makeSettings().baseUrl, path);
}

/** The dashboard's root, from the link to its status page. */
export function dashboardRoot(dashboard: string): string {
  return dashboard.replace(/\/status\/?$/, '/');
}

/** The link to the dashboard (a new tab) and its plots (JupyterLab panels). */
function Dashboard(props: {
  dashboard: string;
  actions: IActions;
}): JSX.Element {
  const { dashboard, actions } = props;
  const plots = usePlots(dashboard);
  const [more, setMore] = useState('');
  const open = (name: string, title: string): void => {
    const path = plots?.[name];
    if (path) {
      actions.openPlot(
        `Dask: ${title}`,
        URLExt.join(serverUrl(dashboardRoot(dashboard)), path)
      );
    }
  };
  const main = new Set(MAIN_PLOTS.map(([name]) => name));
  const others = Object.keys(plots ?? {})
    .filter(name => !main.has(name))
    .sort();
  return (
    <div className="jp-taskcell-dashboard-box">
      <a
        className="jp-taskcell-dashboard"
        href={serverUrl(dashboard)}
        target="_blank"
        rel="noopener noreferrer"
        title={dashboard}
      >
        Dask dashboard ↗
      </a>
      <div className="jp-taskcell-plots">
        {MAIN_PLOTS.filter(([name]) => plots?.[name]).map(([name, title]) => (
          <button
            key={name}
            type="button"
            className="jp-taskcell-plot jp-mod-styled"
            data-plot={name}
            title={`Open the dashboard's ${title.toLowerCase()} as a JupyterLab panel`}
            onClick={() => open(name, title)}
          >
            {title}
          </button>
        ))}
        {others.length > 0 && (
          <select
            className="jp-taskcell-more-plots jp-mod-styled"
            aria-label="Open another dashboard plot"
            value={more}
            onChange={e => {
              setMore('');
              const name = e.target.value;
              if (name) {
                open(name, name.replace(/^Individual /, ''));
              }
            }}
          >
            <option value="">More plots…</option>
            {others.map(name => (
              <option key={name} value={name}>
                {name.replace(/^Individual /, '')}
              </option>
            ))}
          </select>
        )}
      </div>
    </div>
  );
}

/** Scale and stop the cluster, when taskcell started it; the dashboard, when it serves one. */
export function ClusterControls(props: {
  model: SidebarModel;
  state: IClusterState;
  actions: IActions;
}): JSX.Element | null {
  const { model, state, actions } = props;
  const connected = state.view?.worker_count ?? 0;
  const [workers, setWorkers] = useState('');
  const control = state.control;
  const scale = async (): Promise<void> => {
    const n = Number(workers);
    if (!Number.isInteger(n) || n < 0) {
      return;
    }
    if (n < connected) {
      const body =
        `Scale the cluster at ${state.address} from ${connected} to ${n} workers? The workers ` +
        'retired move their results to the others, then stop; a task running on one is stopped.';
      if (!(await actions.confirm('Retire workers?', body, 'Retire'))) {
        return;
      }
    }
    setWorkers('');
    await model.scale(n);
  };
  const stop = async (): Promise<void> => {
    const body =
      `Stop the cluster at ${state.address}? Its workers stop, and the tasks and results on ` +
      'them are lost. A notebook that used it starts a new one at its next %%task cell.';
    if (await actions.confirm('Stop the cluster?', body, 'Stop')) {
      await model.stop();
    }
  };
  return (
    <div className="jp-taskcell-controls">
      {control?.scalable && (
        <form
          className="jp-taskcell-scale"
          onSubmit={e => {
            e.preventDefault();
            void scale();
          }}
        >
          <label className="jp-taskcell-label">
            Workers
            <input
              type="number"
              min={0}
              className="jp-taskcell-workers-input jp-mod-styled"
              aria-label="Number of workers"
              placeholder={String(connected)}
              value={workers}
              onChange={e => setWorkers(e.target.value)}
            />
          </label>
          <button
            type="submit"
            className="jp-taskcell-scale-button jp-mod-styled"
            disabled={model.busy || !workers}
          >
            Scale
          </button>
          <button
            type="button"
            className="jp-taskcell-stop jp-mod-styled jp-mod-warn"
            disabled={model.busy}
            title="Stop this cluster and its workers"
            onClick={() => void stop()}
          >
            Stop
          </button>
        </form>
      )}
      {state.dashboard && (
        <Dashboard dashboard={state.dashboard} actions={actions} />
      )}
    </div>
  );
}
