// @vitest-environment happy-dom
import { Signal } from '@lumino/signaling';
import React, { act } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import type {
  ICancelResult,
  IClusterInfo,
  IClusterList,
  IClusterState,
  IPlannerChoices,
  IResourcesClient,
  IRetireResult,
  IScaleResult,
  IPoolView,
  IStartedCluster,
  IStartWorkerResult,
  IStopResult,
  ISuggestionInfo,
  ISuggestionRequest,
  ITaskOutput
} from '../src/api';
import { type INotebookContext, SidebarModel } from '../src/model';
import type { IActions } from '../src/occupancy';
import { ClusterView } from '../src/panel';
import { Planner, PlannerModel } from '../src/planner';
import { CLUSTER, NOW, ended, running, state, view } from './views';

(
  globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }
).IS_REACT_ACT_ENVIRONMENT = true;

// The real ones bring JupyterLab's web components, which happy-dom cannot style.
vi.mock('@jupyterlab/ui-components', () => ({ ReactWidget: class {} }));

/** A server whose long polls answer when the test says so. */
class FakeClient implements IResourcesClient {
  list: IClusterList = { clusters: [CLUSTER] };
  polls: Array<{ since: number | null; answer: (s: IClusterState) => void }> =
    [];
  calls: string[] = [];
  suggestions: ISuggestionRequest[] = [];

  async clusters(): Promise<IClusterList> {
    return this.list;
  }

  cluster(
    id: string,
    since: number | null,
    _t: number,
    signal?: AbortSignal
  ): Promise<IClusterState> {
    return new Promise((resolve, reject) => {
      this.polls.push({ since, answer: resolve });
      signal?.addEventListener('abort', () =>
        reject(Object.assign(new Error('aborted'), { name: 'AbortError' }))
      );
    });
  }

  async start(): Promise<IStartedCluster> {
    this.calls.push('start');
    return { id: CLUSTER.id, address: CLUSTER.address };
  }

  async cancel(id: string, key: string): Promise<ICancelResult> {
    this.calls.push(`cancel ${key}`);
    return { key, was: 'running' };
  }

  async scale(id: string, workers: number): Promise<IScaleResult> {
    this.calls.push(`scale ${workers}`);
    return { workers };
  }

  async stop(id: string): Promise<IStopResult> {
    this.calls.push('stop');
    return { address: CLUSTER.address };
  }

  async retire(id: string, worker: string): Promise<IRetireResult> {
    this.calls.push(`retire ${worker}`);
    return { worker };
  }

  async startWorker(
    id: string,
    kernel: string,
    pool: string
  ): Promise<IStartWorkerResult> {
    this.calls.push(`start-worker ${kernel} ${pool}`);
    return { kernel, pool };
  }

  async output(id: string, key: string): Promise<ITaskOutput> {
    return { key, worker: null, text: '', truncated: false, error: null };
  }

  async plannerChoices(): Promise<IPlannerChoices> {
    return {
      profiles: [{ name: 'default', description: '4x memory' }],
      default_profile: 'default'
    };
  }

  async suggest(request: ISuggestionRequest): Promise<ISuggestionInfo> {
    this.suggestions.push(request);
    if (request.size === 'bad') {
      throw new Error("size= 'bad' is not a quantity");
    }
    return {
      size: 1,
      profile: 'default',
      memory: 1,
      disk: 0,
      gpu: null,
      preset: 'small_task',
      request: null,
      line: '%%task small_task',
      fits: true,
      message: 'small_task fits',
      workers: []
    };
  }
}

class FakeContext implements INotebookContext {
  path: string | null = 'demo.ipynb';
  variables: Record<string, number> = { df: 123456 };
  changed = new Signal<this, void>(this);

  currentPath(): string | null {
    return this.path;
  }

  insertTaskLine(): boolean {
    return true;
  }

  async measureVariable(name: string): Promise<number | null> {
    return this.variables[name] ?? null;
  }

  kernel = true;
  /** What the kernel does when asked to use a cluster: nothing, unless a test says. */
  attach = vi.fn(async (address: string): Promise<void> => undefined);

  hasKernel(): boolean {
    return this.kernel;
  }

  attachCluster(address: string): Promise<void> {
    return this.attach(address);
  }
}

const actions: IActions = {
  confirm: vi.fn(async () => true),
  showOutput: vi.fn(),
  openPlot: vi.fn()
};

let container: HTMLDivElement;
let root: Root;
let client: FakeClient;
let context: FakeContext;
let model: SidebarModel;

/** Let timers and promises run until `done()` holds (or fail after many steps). */
async function until(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) {
    await act(async () => {
      await vi.advanceTimersByTimeAsync(50);
    });
  }
  expect(done(), what).toBe(true);
}

function text(selector: string): string[] {
  return [...container.querySelectorAll(selector)].map(
    e => e.textContent ?? ''
  );
}

let answered = 0;

/** Answer the next long poll with `shown`, once the sidebar has asked. */
async function answer(shown: IClusterState): Promise<void> {
  await until(() => client.polls.length > answered, 'a long poll is waiting');
  await act(async () => client.polls[answered++].answer(shown));
  await until(() => model.state === shown, 'the answer is drawn');
}

beforeEach(async () => {
  vi.useFakeTimers({ now: NOW * 1000 });
  container = document.createElement('div');
  document.body.append(container);
  client = new FakeClient();
  answered = 0;
  context = new FakeContext();
  model = new SidebarModel(client, context, () => true);
  root = createRoot(container);
  await act(async () =>
    root.render(<ClusterView model={model} actions={actions} />)
  );
});

afterEach(() => {
  act(() => root.unmount());
  model.dispose();
  container.remove();
  vi.useRealTimers();
});

describe('the sidebar draws the view the server sends', () => {
  it('shows its words, and a running task whose age grows every second', async () => {
    await answer(state(view([running('cell-3', NOW - 3)])));
    expect(text('.jp-taskcell-summary')).toEqual([
      '1 worker · 1 running · 0 waiting on workers · 0 queued'
    ]);
    expect(text('.jp-taskcell-worker-head')).toEqual(['gpu-box']);
    const age = (): string => text('.jp-taskcell-task-waited')[0];
    expect(age()).toBe('3s');
    await until(() => age() === '5s', 'the age ticks');
    // The scheduler's clock is the reference, whatever the browser's: an hour behind it, a
    // task that started 3 s before the scheduler's now has run 3 s.
    const behind = NOW - 3600;
    await answer(state(view([running('cell-3', behind - 3)], [], behind), 2));
    expect(age()).toBe('3s');
    await until(() => age() === '4s', 'the age ticks on from there');
  });

  it('patches the DOM in place: focus and the typed search survive an update', async () => {
    const endedTasks = [
      ended('cell-1', 'finished', 'gpu-box'),
      ended('cell-2', 'failed', 'other', 'ValueError: x')
    ];
    await answer(state(view([], endedTasks)));
    const search = container.querySelector<HTMLInputElement>(
      '.jp-taskcell-search'
    )!;
    search.focus();
    await act(async () => {
      const setter = Object.getOwnPropertyDescriptor(
        HTMLInputElement.prototype,
        'value'
      )!.set!;
      setter.call(search, 'valueerror');
      search.dispatchEvent(new Event('input', { bubbles: true }));
    });
    expect(text('.jp-taskcell-ended-task .jp-taskcell-task-name')).toEqual([
      'cell-2'
    ]);
    await answer(state(view([running('cell-4', NOW)], endedTasks), 2));
    expect(document.activeElement).toBe(search);
    expect(container.querySelector('.jp-taskcell-search')).toBe(search);
    expect(search.value).toBe('valueerror');
    expect(text('.jp-taskcell-ended-task .jp-taskcell-task-name')).toEqual([
      'cell-2'
    ]);
  });

  it('filters the ended tasks by cell, state and worker', async () => {
    const endedTasks = [
      ended('cell-1', 'finished', 'gpu-box'),
      ended('cell-2', 'failed', 'other'),
      ended('cell-1b', 'cancelled', 'other')
    ];
    await answer(state(view([], endedTasks)));
    const choose = async (which: string, value: string): Promise<void> => {
      const select = container.querySelector<HTMLSelectElement>(
        `.jp-taskcell-filter-${which}`
      )!;
      await act(async () => {
        select.value = value;
        select.dispatchEvent(new Event('change', { bubbles: true }));
      });
    };
    await choose('worker', 'other');
    expect(text('.jp-taskcell-ended-task .jp-taskcell-task-name')).toEqual([
      'cell-2',
      'cell-1b'
    ]);
    await choose('state', 'failed');
    expect(text('.jp-taskcell-ended-task .jp-taskcell-task-name')).toEqual([
      'cell-2'
    ]);
    await choose('cell', 'cell-1');
    expect(text('.jp-taskcell-no-match')).toEqual(['No ended task matches.']);
  });

  it('places the timeline by the ticking clock', async () => {
    await answer(state(view([running('cell-3', NOW - 30)])));
    const span = (key: string): HTMLElement =>
      container.querySelector(`.jp-taskcell-span[data-key='${key}']`)!;
    expect(span('a').style.left).toBe('50.00%');
    expect(span('a').style.width).toBe('25.00%');
    expect(span('cell-3-0123').style.left).toBe('90.00%');
    await until(
      () => parseFloat(span('a').style.left) < 49.5,
      'the finished task moves left as time goes'
    );
  });

  it('cancels, scales, and stops only once the user says so', async () => {
    await answer(state(view([running('cell-3', NOW)])));
    await act(async () =>
      container.querySelector<HTMLButtonElement>('.jp-taskcell-cancel')!.click()
    );
    const input = container.querySelector<HTMLInputElement>(
      '.jp-taskcell-workers-input'
    )!;
    await act(async () => {
      const setter = Object.getOwnPropertyDescriptor(
        HTMLInputElement.prototype,
        'value'
      )!.set!;
      setter.call(input, '3');
      input.dispatchEvent(new Event('input', { bubbles: true }));
    });
    await act(async () =>
      container
        .querySelector<HTMLButtonElement>('.jp-taskcell-scale-button')!
        .click()
    );
    vi.mocked(actions.confirm).mockResolvedValueOnce(false);
    await act(async () =>
      container.querySelector<HTMLButtonElement>('.jp-taskcell-stop')!.click()
    );
    expect(client.calls).toEqual(['cancel cell-3-0123', 'scale 3']);
    await act(async () =>
      container.querySelector<HTMLButtonElement>('.jp-taskcell-stop')!.click()
    );
    expect(client.calls).toEqual(['cancel cell-3-0123', 'scale 3', 'stop']);
  });

  it("starts a pool's worker without asking, while fewer than its max are up", async () => {
    const pool = (name: string, startable: boolean): IPoolView => ({
      name,
      kernel: 'k',
      title: `${name} · local`,
      shape: 'CPU=1, MEMORY=1 GiB',
      detail: startable
        ? '0 of 1 worker · 0 tasks waiting'
        : '1 of 1 worker · 0 tasks waiting',
      startable,
      workers: []
    });
    const pools = [pool('spare', true), pool('full', false)];
    await answer(state({ ...view(), pools_title: 'Pools: 2', pools }));
    const button = (name: string): HTMLButtonElement =>
      container.querySelector<HTMLButtonElement>(
        `.jp-taskcell-pool[data-name='${name}'] .jp-taskcell-start-worker`
      )!;
    expect(button('full').disabled).toBe(true);
    vi.mocked(actions.confirm).mockClear();
    await act(async () => button('spare').click());
    expect(client.calls).toEqual(['start-worker k spare']);
    expect(actions.confirm).not.toHaveBeenCalled();
  });

  it('offers no scale or stop for a cluster taskcell did not start', async () => {
    await answer(
      state(view(), 1, { control: { scalable: false, started_here: false } })
    );
    expect(container.querySelector('.jp-taskcell-scale')).toBeNull();
  });
});

describe('attaching the notebook in focus to a cluster', () => {
  /** A cluster this server started, which no notebook uses yet. */
  const STARTED: IClusterInfo = {
    id: 'def456',
    address: 'tcp://127.0.0.1:9000',
    sources: ['server'],
    notebooks: [],
    kernels: [],
    status: null
  };

  const attachButton = (): HTMLButtonElement =>
    container.querySelector<HTMLButtonElement>('.jp-taskcell-attach')!;

  async function show(id: string): Promise<void> {
    const select = container.querySelector<HTMLSelectElement>(
      '.jp-taskcell-cluster-select'
    )!;
    await act(async () => {
      select.value = id;
      select.dispatchEvent(new Event('change', { bubbles: true }));
    });
  }

  beforeEach(async () => {
    client.list = { clusters: [CLUSTER, STARTED] };
    await act(async () => void (await model.refresh()));
  });

  it("marks the notebook's cluster, and attaches it to another in one click", async () => {
    expect(text('.jp-taskcell-cluster-select option')).toEqual([
      'demo.ipynb (this notebook)',
      'started here · tcp://127.0.0.1:9000'
    ]);
    expect(attachButton().disabled).toBe(true);
    expect(attachButton().textContent).toBe('Attached');
    await show(STARTED.id);
    expect(attachButton().disabled).toBe(false);
    expect(attachButton().textContent).toBe('Attach');
    // The kernel records its new cluster: the server's next list names the notebook with it.
    context.attach.mockImplementationOnce(async () => {
      client.list = {
        clusters: [
          {
            ...STARTED,
            sources: ['kernel', 'server'],
            notebooks: CLUSTER.notebooks,
            kernels: ['k']
          }
        ]
      };
    });
    await act(async () => attachButton().click());
    await until(() => !model.busy, 'the attach is done');
    expect(context.attach).toHaveBeenCalledWith('tcp://127.0.0.1:9000');
    expect(text('.jp-taskcell-cluster-select option')).toEqual([
      'demo.ipynb (this notebook)'
    ]);
    expect(model.clusterId).toBe(STARTED.id);
    expect(attachButton().disabled).toBe(true);
    expect(attachButton().textContent).toBe('Attached');
    expect(container.querySelector('.jp-taskcell-notice')).toBeNull();
  });

  it("shows the kernel's error and leaves the mark where it was", async () => {
    await show(STARTED.id);
    context.attach.mockRejectedValueOnce(
      new Error(
        'ClusterError: cannot reach the scheduler at tcp://127.0.0.1:9000'
      )
    );
    await act(async () => attachButton().click());
    await until(() => !model.busy, 'the attach is done');
    expect(text('.jp-taskcell-notice')).toEqual([
      'Could not attach the notebook to tcp://127.0.0.1:9000: ' +
        'ClusterError: cannot reach the scheduler at tcp://127.0.0.1:9000'
    ]);
    expect(text('.jp-taskcell-cluster-select option')[0]).toBe(
      'demo.ipynb (this notebook)'
    );
    expect(attachButton().disabled).toBe(false);
  });

  it('offers no attach without a kernel in focus', async () => {
    context.kernel = false;
    await show(STARTED.id);
    expect(attachButton().disabled).toBe(true);
    context.kernel = true;
    await show(STARTED.id);
    expect(attachButton().disabled).toBe(false);
  });
});

describe('the planner', () => {
  let plannerRoot: Root;
  let planner: PlannerModel;
  let box: HTMLDivElement;

  beforeEach(async () => {
    box = document.createElement('div');
    document.body.append(box);
    planner = new PlannerModel(client, context, () => 'abc123');
    plannerRoot = createRoot(box);
    await act(async () => plannerRoot.render(<Planner model={planner} />));
  });

  afterEach(() => {
    act(() => plannerRoot.unmount());
    planner.dispose();
    box.remove();
  });

  async function ask(input: string): Promise<void> {
    const field = box.querySelector<HTMLInputElement>('.jp-taskcell-size')!;
    await act(async () => {
      const setter = Object.getOwnPropertyDescriptor(
        HTMLInputElement.prototype,
        'value'
      )!.set!;
      setter.call(field, input);
      field.dispatchEvent(new Event('input', { bubbles: true }));
    });
    await act(async () =>
      box.querySelector<HTMLButtonElement>('.jp-taskcell-suggest')!.click()
    );
    await until(() => !planner.busy, 'the planner answered');
  }

  it('measures a variable through the kernel and sends files with the notebook', async () => {
    await ask('df');
    await ask('data/*.csv');
    expect(client.suggestions).toEqual([
      {
        size: 123456,
        profile: 'default',
        cluster: 'abc123',
        notebook: 'demo.ipynb'
      },
      {
        size: 'data/*.csv',
        profile: 'default',
        cluster: 'abc123',
        notebook: 'demo.ipynb'
      }
    ]);
    expect(box.querySelector('.jp-taskcell-task-line')?.textContent).toBe(
      '%%task small_task'
    );
  });

  it('forgets its error when another notebook comes into focus', async () => {
    await ask('bad');
    expect(box.querySelector('.jp-taskcell-planner-error')?.textContent).toBe(
      "size= 'bad' is not a quantity"
    );
    context.path = 'other.ipynb';
    await act(async () => context.changed.emit());
    expect(box.querySelector('.jp-taskcell-planner-error')).toBeNull();
  });
});
