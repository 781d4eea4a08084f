// @vitest-environment happy-dom
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';
import { afterEach, describe, expect, it, vi } from 'vitest';

import type {
  ICancelResult,
  IClusterList,
  IClusterState,
  IPlannerChoices,
  IResourcesClient,
  ISuggestionInfo,
  ISuggestionRequest
} from '../src/api';
import { INotebookContext, OccupancyView, ResourcesPanel } from '../src/panel';
import { gpuSnapshot, state } from './fixtures';

/** A server whose long polls answer when the test says so. */
class FakeClient implements IResourcesClient {
  list: IClusterList = {
    clusters: [
      {
        id: 'abc123',
        address: 'tcp://127.0.0.1:8786',
        sources: ['kernel'],
        notebooks: [{ path: 'demo.ipynb', name: 'demo.ipynb', kernel_id: 'k' }],
        kernels: ['k'],
        status: null
      }
    ]
  };
  polls: Array<{
    id: string;
    since: number | null;
    signal?: AbortSignal;
    answer: (s: IClusterState) => void;
  }> = [];
  listCalls = 0;
  suggestions: ISuggestionRequest[] = [];
  cancels: Array<{ id: string; key: string; answer: (r: ICancelResult) => void; fail: (e: Error) => void }> =
    [];

  async clusters(): Promise<IClusterList> {
    this.listCalls++;
    return this.list;
  }

  cluster(id: string, since: number | null, _t: number, signal?: AbortSignal): Promise<IClusterState> {
    return new Promise((resolve, reject) => {
      this.polls.push({ id, since, signal, answer: resolve });
      signal?.addEventListener('abort', () => {
        const error = new Error('aborted');
        error.name = 'AbortError';
        reject(error);
      });
    });
  }

  cancel(id: string, key: string): Promise<ICancelResult> {
    return new Promise((resolve, reject) => {
      this.cancels.push({ id, key, answer: resolve, fail: reject });
    });
  }

  async plannerChoices(): Promise<IPlannerChoices> {
    return {
      profiles: [
        { name: 'default', description: '4x memory' },
        { name: 'light', description: '1x memory' }
      ],
      default_profile: 'default'
    };
  }

  async suggest(request: ISuggestionRequest): Promise<ISuggestionInfo> {
    this.suggestions.push(request);
    return {
      size: 2 ** 30,
      profile: request.profile,
      memory: 4 * 2 ** 30,
      disk: 2 ** 30,
      gpu: null,
      preset: 'small_task',
      request: null,
      line: '%%task small_task --disk 1Gi',
      fits: true,
      message: 'small_task fits',
      workers: []
    };
  }
}

/** A signal that counts its connections, to see that dispose() lets go of them. */
class CountingSignal<T> extends Signal<T, void> {
  connections = 0;
  connect(slot: (sender: T, args: void) => void, thisArg?: unknown): boolean {
    const added = super.connect(slot, thisArg);
    this.connections += added ? 1 : 0;
    return added;
  }
  disconnect(slot: (sender: T, args: void) => void, thisArg?: unknown): boolean {
    const removed = super.disconnect(slot, thisArg);
    this.connections -= removed ? 1 : 0;
    return removed;
  }
}

class FakeContext implements INotebookContext {
  path: string | null = 'demo.ipynb';
  inserted: string[] = [];
  changed = new CountingSignal<this>(this);
  currentPath(): string | null {
    return this.path;
  }
  insertTaskLine(line: string): boolean {
    this.inserted.push(line);
    return true;
  }
}

const settle = () => new Promise(resolve => setTimeout(resolve, 0));

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !check(); i++) {
    await new Promise(resolve => setTimeout(resolve, 10));
  }
  expect(check()).toBe(true);
}

let widgets: Widget[] = [];
afterEach(() => {
  widgets.forEach(w => w.dispose());
  widgets = [];
});

function mount<T extends Widget>(widget: T): T {
  widgets.push(widget);
  Widget.attach(widget, document.body);
  return widget;
}

function gpuLabel(view: Widget): string | null | undefined {
  return view.node.querySelector(
    '.jp-taskcell-worker[data-name="gpu-box"] .jp-taskcell-resource[data-resource="GPU"] .jp-taskcell-resource-label'
  )?.textContent;
}

describe('OccupancyView', () => {
  it("follows the current notebook's cluster with long polls and redraws on each answer", async () => {
    const client = new FakeClient();
    const view = mount(new OccupancyView(client, new FakeContext()));
    await until(() => client.polls.length === 1);
    expect(view.clusterId).toBe('abc123');
    expect(client.polls[0].since).toBeNull();
    const option = view.node.querySelector<HTMLOptionElement>('.jp-taskcell-cluster-select option')!;
    expect(option.textContent).toBe('demo.ipynb');
    expect(option.title).toBe('tcp://127.0.0.1:8786');

    client.polls[0].answer(state(gpuSnapshot(1), { version: 4 }));
    await until(() => gpuLabel(view) === '1 of 2 GPU in use');
    await until(() => client.polls.length === 2);
    expect(client.polls[1].since).toBe(4);

    client.polls[1].answer(state(gpuSnapshot(0), { version: 5 }));
    await until(() => gpuLabel(view) === '0 of 2 GPU in use');
  });

  it('pauses when hidden, aborting the poll in flight, and resumes when shown', async () => {
    const client = new FakeClient();
    const view = mount(new OccupancyView(client, new FakeContext()));
    await until(() => client.polls.length === 1);
    view.hide();
    expect(client.polls[0].signal!.aborted).toBe(true);
    await settle();
    expect(client.polls).toHaveLength(1);

    view.show();
    await until(() => client.polls.length === 2);
    expect(client.polls[1].signal!.aborted).toBe(false);
  });

  it('says how to get a cluster when there is none', async () => {
    const client = new FakeClient();
    client.list = { clusters: [] };
    const view = mount(new OccupancyView(client, new FakeContext()));
    await until(() => view.node.querySelector('.jp-taskcell-message-empty') !== null);
    expect(view.node.textContent).toContain('Run a %%task cell in a notebook');
    expect(client.polls).toHaveLength(0);
  });

  it('refreshes after the last of a burst of kernel events, once', async () => {
    const client = new FakeClient();
    client.list = { clusters: [] };
    const context = new FakeContext();
    mount(new OccupancyView(client, context));
    await until(() => client.listCalls === 1);
    // busy -> idle within a second: the kernel recorded its cluster in between.
    context.changed.emit();
    await until(() => client.listCalls === 2);
    client.list = new FakeClient().list;
    context.changed.emit();
    context.changed.emit();
    await settle();
    expect(client.listCalls).toBe(2);
    await until(() => client.listCalls === 3);
    await until(() => client.polls.length === 1);
    await new Promise(resolve => setTimeout(resolve, 1100));
    expect(client.listCalls).toBe(3);
  });

  it('refreshes the cluster list when the notebook changes, and not after dispose', async () => {
    const client = new FakeClient();
    const context = new FakeContext();
    const view = mount(new OccupancyView(client, context));
    await until(() => client.listCalls === 1);
    context.path = 'other.ipynb';
    context.changed.emit();
    await until(() => client.listCalls === 2);

    const poll = client.polls[client.polls.length - 1];
    expect(context.changed.connections).toBe(1);
    view.dispose();
    expect(poll.signal!.aborted).toBe(true);
    expect(context.changed.connections).toBe(0);
    vi.useFakeTimers();
    try {
      context.changed.emit();
      vi.advanceTimersByTime(5000);
    } finally {
      vi.useRealTimers();
    }
    await settle();
    expect(client.listCalls).toBe(2);
  });
});

describe('cancelling from the sidebar', () => {
  function cancelButton(view: Widget): HTMLButtonElement | null {
    return view.node.querySelector<HTMLButtonElement>(
      '.jp-taskcell-worker .jp-taskcell-task-running .jp-taskcell-cancel'
    );
  }

  it('asks the server to cancel the task, and says so until the task is gone', async () => {
    const client = new FakeClient();
    const view = mount(new OccupancyView(client, new FakeContext()));
    await until(() => client.polls.length === 1);
    client.polls[0].answer(state(gpuSnapshot(1), { version: 4 }));
    await until(() => cancelButton(view) !== null);
    expect(cancelButton(view)!.textContent).toBe('Cancel');
    expect(cancelButton(view)!.getAttribute('aria-label')).toBe('Cancel cell-3');

    cancelButton(view)!.click();
    await until(() => client.cancels.length === 1);
    expect(client.cancels[0]).toMatchObject({ id: 'abc123', key: 'cell-3-abc' });
    expect(cancelButton(view)!.disabled).toBe(true);
    expect(cancelButton(view)!.textContent).toBe('Cancelling…');
    cancelButton(view)!.click(); // a second click asks nothing more
    await settle();
    expect(client.cancels).toHaveLength(1);

    client.cancels[0].answer({ key: 'cell-3-abc', was: 'running' });
    await until(() => client.polls.length === 2);
    expect(cancelButton(view)!.disabled).toBe(true); // still running until its process ends
    client.polls[1].answer(state(gpuSnapshot(0), { version: 5 }));
    await until(() => gpuLabel(view) === '0 of 2 GPU in use');
    expect(cancelButton(view)).toBeNull();
  });

  it("shows the server's refusal and lets the user try again", async () => {
    const client = new FakeClient();
    const view = mount(new OccupancyView(client, new FakeContext()));
    await until(() => client.polls.length === 1);
    client.polls[0].answer(state(gpuSnapshot(1), { version: 4 }));
    await until(() => cancelButton(view) !== null);
    cancelButton(view)!.click();
    await until(() => client.cancels.length === 1);
    client.cancels[0].fail(new Error("the cluster shows no running or waiting task 'cell-3-abc'"));
    const notice = view.node.querySelector<HTMLElement>('.jp-taskcell-notice')!;
    await until(() => !notice.hidden);
    expect(notice.textContent).toBe(
      "Could not cancel cell-3-abc: the cluster shows no running or waiting task 'cell-3-abc'"
    );
    expect(cancelButton(view)!.disabled).toBe(false);
  });
});

describe('ResourcesPanel planner', () => {
  it('suggests for the cluster shown and inserts the line into the active cell', async () => {
    const client = new FakeClient();
    const context = new FakeContext();
    const panel = mount(new ResourcesPanel(client, context));
    await until(() => panel.node.querySelectorAll('.jp-taskcell-profile option').length === 2);
    await until(() => panel.occupancy.clusterId === 'abc123');

    const size = panel.node.querySelector<HTMLInputElement>('.jp-taskcell-size')!;
    size.value = '1 GiB';
    panel.node.querySelector<HTMLFormElement>('.jp-taskcell-planner-form')!.requestSubmit();
    await until(() => panel.node.querySelector('.jp-taskcell-task-line') !== null);
    expect(client.suggestions).toEqual([{ size: '1 GiB', profile: 'default', cluster: 'abc123' }]);

    const insert = panel.node.querySelector<HTMLButtonElement>('.jp-taskcell-insert')!;
    expect(insert.hidden).toBe(false);
    insert.click();
    expect(context.inserted).toEqual(['%%task small_task --disk 1Gi']);
    expect(panel.node.querySelector('.jp-taskcell-planner-note')!.textContent).toBe(
      'Inserted %%task small_task --disk 1Gi'
    );
  });

  it("shows the server's message when it refuses the input", async () => {
    const client = new FakeClient();
    client.suggest = async () => {
      throw new Error("'size' must be a quantity such as \"12 GiB\", got 'lots'");
    };
    const panel = mount(new ResourcesPanel(client, new FakeContext()));
    await panel.planner.suggest();
    expect(panel.node.querySelector('.jp-taskcell-planner-error')!.textContent).toContain(
      "'size' must be a quantity"
    );
    expect(panel.node.querySelector<HTMLButtonElement>('.jp-taskcell-insert')!.hidden).toBe(true);
  });
});
