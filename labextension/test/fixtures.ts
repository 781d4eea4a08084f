import type {
  IClusterState,
  IEndedTask,
  IResourceUse,
  ISnapshot,
  ITaskInfo,
  IWorkerSnapshot
} from '../src/api';

export function use(resource: string, total: number, running = 0, assigned = 0): IResourceUse {
  return { resource, total, running, assigned };
}

export function task(key: string, state: ITaskInfo['state'], extra: Partial<ITaskInfo> = {}): ITaskInfo {
  return {
    key,
    name: key.split('-')[0],
    request: { GPU: 1 },
    state,
    since: 1000,
    worker: state === 'queued' ? null : 'tcp://127.0.0.1:4001',
    waiting_for: null,
    ...extra
  };
}

export function worker(
  name: string,
  resources: IResourceUse[],
  tasks: ITaskInfo[] = [],
  extra: Partial<IWorkerSnapshot> = {}
): IWorkerSnapshot {
  return {
    address: `tcp://127.0.0.1:${4000 + name.length}`,
    name,
    nthreads: 2,
    memory_limit: 8 * 2 ** 30,
    resources,
    tasks,
    running_tasks: tasks.filter(t => t.state === 'running').length,
    assigned_tasks: tasks.filter(t => t.state === 'assigned').length,
    ...extra
  };
}

/** The cluster of the end-to-end test: one worker with two GPUs, one of them in use. */
export function gpuSnapshot(running = 1): ISnapshot {
  const tasks = running ? [task('cell-3-abc', 'running', { name: 'cell-3' })] : [];
  return {
    scheduler: 'tcp://127.0.0.1:8786',
    time: 1000,
    seq: 7,
    workers: [worker('gpu-box', [use('threads', 1, running), use('GPU', 2, running)], tasks)],
    totals: [use('threads', 1, running), use('GPU', 2, running)],
    queue: [],
    queued: 0,
    recent: [],
    strips: [],
    dashboard: null,
    pools: []
  };
}

export function state(snapshot: ISnapshot | null, extra: Partial<IClusterState> = {}): IClusterState {
  return {
    id: 'abc123',
    address: 'tcp://127.0.0.1:8786',
    status: 'connected',
    message: null,
    version: 3,
    updated: 1000,
    snapshot,
    ...extra
  };
}

export function ended(key: string, state: IEndedTask['state'], extra: Partial<IEndedTask> = {}): IEndedTask {
  return {
    key,
    name: key.split('-')[0],
    request: { GPU: 1 },
    state,
    worker: 'tcp://127.0.0.1:4007',
    ended: 1000,
    wall: 4.25,
    peak_memory: 14 * 2 ** 20,
    error: null,
    ...extra
  };
}
