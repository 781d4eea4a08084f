/**
 * Small views as the server sends them, written by hand: the sidebar only draws them, so these
 * tests check the drawing, the ticking and the actions, never the words' rules (view.py's own
 * tests do).
 */
import type {
  IClusterInfo,
  IClusterState,
  IEndedView,
  ISnapshotView,
  ITaskView,
  ITicking
} from '../src/api';

export const NOW = 1_000_000;

export function ticking(before: string, since: number, after = ''): ITicking {
  return { text: `${before}?${after}`, since, before, after };
}

export function running(name: string, since: number): ITaskView {
  return {
    key: `${name}-0123`,
    name,
    state: 'running',
    request: 'GPU=1',
    where: 'on tcp://127.0.0.1:4001',
    waited: ticking('', since),
    waiting_for: null
  };
}

export function ended(
  name: string,
  state: IEndedView['state'],
  worker: string,
  error: string | null = null
): IEndedView {
  return {
    key: `${name}-0123`,
    name,
    state,
    worker,
    detail: ticking(`${worker} · 1.0s · `, NOW - 5, ' ago'),
    error
  };
}

export function view(
  tasks: ITaskView[] = [],
  endedTasks: IEndedView[] = [],
  now = NOW
): ISnapshotView {
  const gpu = {
    resource: 'GPU',
    total: 2,
    running: tasks.length,
    assigned: 0,
    running_share: tasks.length / 2,
    assigned_share: 0,
    label: `${tasks.length} of 2 GPU in use`,
    title: 'GPU',
    oversubscribed: false
  };
  return {
    now,
    summary: `1 worker · ${tasks.length} running · 0 waiting on workers · 0 queued`,
    worker_count: 1,
    totals: [gpu],
    groups: [
      {
        title: '1 worker with GPU 2',
        resources: ['GPU'],
        workers: [
          {
            address: 'tcp://127.0.0.1:4001',
            name: 'gpu-box',
            busy: tasks.length > 0,
            bars: [gpu],
            running: tasks,
            more_running: null,
            waiting: null
          }
        ],
        folded: null
      }
    ],
    no_workers: null,
    waiting_title: 'Waiting: 0',
    waiting: [],
    waiting_note: 'Nothing waits.',
    ended_title: `Ended: ${endedTasks.length}`,
    ended: endedTasks,
    ended_note: endedTasks.length ? null : 'Nothing has ended yet.',
    ended_filters: {
      cells: [...new Set(endedTasks.map(t => t.name))].sort(),
      workers: [...new Set(endedTasks.map(t => t.worker))].sort(),
      states: [...new Set(endedTasks.map(t => t.state))].sort()
    },
    timeline: {
      seconds: 300,
      rows: [
        {
          worker: 'gpu-box',
          address: 'tcp://127.0.0.1:4001',
          spans: [
            {
              key: 'a',
              name: 'cell-1',
              state: 'finished',
              start: now - 150,
              end: now - 75,
              color: 3,
              title: 'a'
            },
            ...tasks.map(t => ({
              key: t.key,
              name: t.name,
              state: 'running',
              start: t.waited.since!,
              end: null,
              color: 1,
              title: t.name
            }))
          ]
        }
      ],
      cells: [{ name: 'cell-1', color: 3 }],
      more: null,
      note: null
    },
    strips: [
      { resource: 'GPU', shares: [0, 0.5], title: 'GPU over the last 5 min' }
    ],
    dashboard: null,
    pools_title: 'Pools: 0',
    pools: []
  };
}

export const CLUSTER: IClusterInfo = {
  id: 'abc123',
  address: 'tcp://127.0.0.1:8786',
  sources: ['kernel'],
  notebooks: [{ path: 'demo.ipynb', name: 'demo.ipynb', kernel_id: 'k' }],
  kernels: ['k'],
  status: null
};

export function state(
  shown: ISnapshotView,
  version = 1,
  extra: Partial<IClusterState> = {}
): IClusterState {
  // The scheduler's time as the server answered: the view's own.
  return {
    id: CLUSTER.id,
    address: CLUSTER.address,
    status: 'connected',
    message: null,
    version,
    updated: NOW,
    now: shown.now,
    snapshot: null,
    view: shown,
    dashboard: null,
    control: { scalable: true, started_here: false },
    ...extra
  };
}
