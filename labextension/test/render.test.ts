// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';

import type { IClusterInfo, ISuggestionInfo } from '../src/api';
import {
  clusterLabel,
  pickCluster,
  renderBar,
  renderSnapshot,
  renderState,
  renderSuggestion,
  withTaskLine
} from '../src/render';
import { barView, duration, secondsLabel, showAmount } from '../src/view';
import { ended, gpuSnapshot, state, task, use, worker } from './fixtures';

const GiB = 2 ** 30;

function widths(bar: HTMLElement): [string, string] {
  const running = bar.querySelector<HTMLElement>('.jp-taskcell-bar-running')!;
  const assigned = bar.querySelector<HTMLElement>('.jp-taskcell-bar-assigned')!;
  return [running.style.width, assigned.style.width];
}

describe('showAmount', () => {
  it.each([
    ['GPU', 1, '1'],
    ['GPU', 0.5, '0.5'],
    ['threads', 0.1 + 0.2, '0.3'],
    ['MEMORY', 512, '512 B'],
    ['MEMORY', 1.5 * GiB, '1.5 GiB'],
    ['memory', 4 * GiB, '4 GiB'],
    ['SHM', 64 * 2 ** 20, '64 MiB'],
    ['DISK', 200 * GiB, '200 GiB'],
    ['DISK', 3 * 2 ** 40, '3 TiB'],
    ['DISK', 1.125 * GiB, '1.13 GiB'],
    ['tokens', 1234567, '1234570']
  ])('%s %d -> %s', (resource, value, text) => {
    expect(showAmount(resource, value)).toBe(text);
  });

  it.each([
    [0, '0s'],
    [59, '59s'],
    [75, '1m15s'],
    [4000, '1h06m'],
    [-3, '0s']
  ])('duration(%d) -> %s', (seconds, text) => {
    expect(duration(seconds)).toBe(text);
  });

  it.each([
    [0.05, '0.0s'],
    [4.25, '4.2s'],
    [59.99, '59.9s'],
    [75, '1m15s']
  ])('secondsLabel(%d) -> %s', (seconds, text) => {
    expect(secondsLabel(seconds)).toBe(text);
  });
});

describe('renderBar', () => {
  it('shows one of two GPUs in use as half a bar', () => {
    const row = renderBar(barView(use('GPU', 2, 1)));
    expect(row.dataset.resource).toBe('GPU');
    expect(row.querySelector('.jp-taskcell-resource-label')!.textContent).toBe('1 of 2 GPU in use');
    expect(widths(row)).toEqual(['50.0%', '0.0%']);
    expect(row.querySelector('.jp-taskcell-bar')!.getAttribute('aria-valuenow')).toBe('1');
  });

  it('tells running and assigned apart, and caps the waiting part at what is free', () => {
    const row = renderBar(barView(use('GPU', 2, 1, 3)));
    expect(row.textContent).toContain('1 of 2 GPU in use, 3 waiting');
    expect(widths(row)).toEqual(['50.0%', '50.0%']);
    expect(row.querySelector('.jp-taskcell-bar-oversubscribed')).not.toBeNull();
  });

  it('spells bytes in binary units', () => {
    const row = renderBar(barView(use('MEMORY', 4 * GiB, GiB, 2 * GiB)));
    expect(row.textContent).toContain('1 GiB of 4 GiB MEMORY in use, 2 GiB waiting');
    expect(widths(row)).toEqual(['25.0%', '50.0%']);
  });

  it('draws an empty bar, not NaN, for a resource with nothing in it', () => {
    const row = renderBar(barView(use('GPU', 0)));
    expect(widths(row)).toEqual(['0.0%', '0.0%']);
    expect(row.textContent).toContain('0 of 0 GPU in use');
  });
});

describe('renderSnapshot', () => {
  it('draws a row per worker with a bar per resource, and its running task', () => {
    const root = renderSnapshot(gpuSnapshot(1), 1075);
    const box = root.querySelector<HTMLElement>('.jp-taskcell-worker[data-name="gpu-box"]')!;
    const gpu = box.querySelector<HTMLElement>('.jp-taskcell-resource[data-resource="GPU"]')!;
    expect(gpu.dataset.running).toBe('1');
    expect(gpu.dataset.total).toBe('2');
    expect(box.querySelectorAll('.jp-taskcell-resource')).toHaveLength(2);
    const running = box.querySelectorAll('.jp-taskcell-task-running');
    expect(running).toHaveLength(1);
    expect(running[0].textContent).toContain('cell-3');
    expect(running[0].textContent).toContain('GPU=1');
    expect(running[0].querySelector('.jp-taskcell-task-waited')!.textContent).toBe('1m15s');
    expect(box.querySelector('.jp-taskcell-empty')).toBeNull(); // busy, so not "idle"
    expect(root.querySelector('.jp-taskcell-totals')!.textContent).toContain('1 of 2 GPU in use');
    expect(root.querySelector('.jp-taskcell-summary')!.textContent).toBe(
      '1 worker · 1 running · 0 waiting on workers · 0 queued'
    );
    expect(root.querySelector('.jp-taskcell-group-title')!.textContent).toBe(
      '1 worker with threads 1, GPU 2'
    );
  });

  it('shows none in use when the task has ended', () => {
    const root = renderSnapshot(gpuSnapshot(0));
    const gpu = root.querySelector<HTMLElement>(
      '.jp-taskcell-worker .jp-taskcell-resource[data-resource="GPU"]'
    )!;
    expect(gpu.textContent).toContain('0 of 2 GPU in use');
    expect(root.querySelectorAll('.jp-taskcell-worker .jp-taskcell-task')).toHaveLength(0);
    expect(root.querySelector('.jp-taskcell-worker .jp-taskcell-empty')!.textContent).toBe('idle');
  });

  it('lists what waits with what each task waits for, and counts what it does not list', () => {
    const snapshot = gpuSnapshot(1);
    snapshot.queue = [
      task('big-1', 'queued', { request: { GPU: 4 }, waiting_for: 'no live worker has GPU=4' })
    ];
    snapshot.queued = 120;
    const queue = renderSnapshot(snapshot).querySelector('.jp-taskcell-queue')!;
    expect(queue.querySelector('.jp-taskcell-heading')!.textContent).toBe('Waiting: 120');
    expect(queue.querySelector('.jp-taskcell-task-reason')!.textContent).toBe(
      'no live worker has GPU=4'
    );
    expect(queue.querySelector('.jp-taskcell-more')!.textContent).toBe('and 119 more');
  });

  it('lists running tasks on the worker and waiting ones under Waiting', () => {
    const tasks = [
      task('b-2', 'assigned', { since: 5, waiting_for: 'GPU busy' }),
      task('a-1', 'running', { since: 9 })
    ];
    const w = worker('gpu-box', [use('GPU', 1, 1, 1)], tasks);
    w.assigned_tasks = 12;
    const root = renderSnapshot({ ...gpuSnapshot(), workers: [w] });
    expect(root.querySelectorAll('.jp-taskcell-worker .jp-taskcell-task-running')).toHaveLength(1);
    expect(root.querySelector('.jp-taskcell-worker .jp-taskcell-more')!.textContent).toBe(
      '12 waiting'
    );
    const waiting = root.querySelectorAll('.jp-taskcell-queue .jp-taskcell-task-assigned');
    expect([...waiting].map(t => t.querySelector('.jp-taskcell-task-reason')!.textContent)).toEqual([
      'GPU busy'
    ]);
    expect(root.querySelector('.jp-taskcell-queue .jp-taskcell-more')!.textContent).toBe(
      'and 11 more'
    );
  });

  it('groups identical workers, busy first, and folds the idle ones of a large group', () => {
    const workers = Array.from({ length: 60 }, (_, i) =>
      worker(`w${String(i).padStart(3, '0')}`, [use('GPU', 2, i === 30 ? 2 : 0)], [], {
        address: `tcp://10.0.0.${i}:1`,
        running_tasks: i === 30 ? 1 : 0
      })
    );
    const root = renderSnapshot({ ...gpuSnapshot(), workers });
    const rows = root.querySelectorAll<HTMLElement>('.jp-taskcell-worker');
    expect(rows).toHaveLength(1);
    expect(rows[0].dataset.name).toBe('w030');
    expect(root.querySelector('.jp-taskcell-group-title')!.textContent).toBe(
      '60 workers with GPU 2 · 1 busy'
    );
    expect(root.querySelector('.jp-taskcell-folded')!.textContent).toMatch(/^59 idle: w000, w001/);
  });

  it('has a legend for the solid and the hatched parts of the bars', () => {
    const legend = renderSnapshot(gpuSnapshot(1)).querySelector('.jp-taskcell-totals .jp-taskcell-legend')!;
    expect(legend.querySelector('.jp-taskcell-legend-running')!.textContent).toBe('running');
    expect(legend.querySelector('.jp-taskcell-legend-assigned')!.textContent).toBe(
      'assigned, waiting on the worker'
    );
    expect(legend.querySelector('.jp-taskcell-swatch.jp-taskcell-bar-assigned')).not.toBeNull();
  });

  it('lists the tasks that ended, failed ones with their error', () => {
    const snapshot = gpuSnapshot(0);
    snapshot.recent = [
      ended('bad-1', 'failed', { error: 'ValueError: bad batch', ended: 1070 }),
      ended('cell-2', 'finished'),
      ended('gone-3', 'cancelled', { worker: null, wall: null, peak_memory: null })
    ];
    const section = renderSnapshot(snapshot, 1075).querySelector('.jp-taskcell-ended')!;
    expect(section.querySelector('.jp-taskcell-heading')!.textContent).toBe('Ended: 3');
    const items = [...section.querySelectorAll<HTMLElement>('.jp-taskcell-ended-task')];
    expect(items.map(i => i.dataset.state)).toEqual(['failed', 'finished', 'cancelled']);
    expect(items[0].querySelector('.jp-taskcell-ended-error')!.textContent).toBe(
      'ValueError: bad batch'
    );
    expect(items[0].querySelector('.jp-taskcell-ended-detail')!.textContent).toBe(
      'gpu-box · 4.2s · peak 14 MiB · 5s ago'
    );
    expect(items[2].querySelector('.jp-taskcell-ended-detail')!.textContent).toBe(
      'never started · 1m15s ago'
    );
    expect(items[1].querySelector('.jp-taskcell-ended-error')).toBeNull();
    expect(
      renderSnapshot(gpuSnapshot(0)).querySelector('.jp-taskcell-ended .jp-taskcell-empty')!.textContent
    ).toBe('Nothing has ended yet.');
  });

  it('draws a strip per resource and links the dashboard when there is one', () => {
    const snapshot = gpuSnapshot(1);
    snapshot.strips = [{ resource: 'GPU', start: 1000 - 5 * 5, shares: [0, 1, null, 0.5, 0.5, 0.5] }];
    snapshot.dashboard = 'http://127.0.0.1:8787/status';
    const root = renderSnapshot(snapshot, 1000);
    const strip = root.querySelector<HTMLElement>('.jp-taskcell-strip[data-resource="GPU"]')!;
    const heights = [...strip.children].map(s => (s as HTMLElement).style.height);
    expect(heights.slice(-6)).toEqual(['0%', '100%', '0%', '50%', '50%', '50%']);
    expect(strip.children[56].classList.contains('jp-taskcell-strip-unknown')).toBe(true);
    expect(strip.title).toBe('GPU over the last 5 min: at most 100% held by running tasks');
    const link = root.querySelector<HTMLAnchorElement>('.jp-taskcell-dashboard')!;
    expect(link.href).toBe('http://127.0.0.1:8787/status');
    expect(link.target).toBe('_blank');
    expect(renderSnapshot(gpuSnapshot(1)).querySelector('.jp-taskcell-dashboard')).toBeNull();
  });

  it('puts a cancel button on running and waiting tasks only when it may', () => {
    const snapshot = gpuSnapshot(1);
    snapshot.queue = [task('big-1', 'queued', { waiting_for: 'no live worker has GPU=4' })];
    snapshot.queued = 1;
    const asked: string[] = [];
    const actions = { cancel: (key: string) => asked.push(key), cancelling: new Set(['big-1']) };
    const root = renderSnapshot(snapshot, 1075, actions);
    const buttons = [...root.querySelectorAll<HTMLButtonElement>('.jp-taskcell-cancel')];
    expect(buttons.map(b => b.closest<HTMLElement>('.jp-taskcell-task')!.dataset.key)).toEqual([
      'cell-3-abc',
      'big-1'
    ]);
    expect(buttons.map(b => b.disabled)).toEqual([false, true]);
    buttons[0].click();
    expect(asked).toEqual(['cell-3-abc']);
    expect(renderSnapshot(snapshot, 1075).querySelector('.jp-taskcell-cancel')).toBeNull();
  });

  it('says so when no worker is connected', () => {
    const root = renderSnapshot({ ...gpuSnapshot(), workers: [], totals: [] });
    expect(root.textContent).toContain('No worker is connected to the scheduler.');
  });
});

describe('renderState', () => {
  it('marks a live cluster connected, and shows its address in full', () => {
    const root = renderState(state(gpuSnapshot(1)));
    expect(root.querySelector<HTMLElement>('.jp-taskcell-status')!.dataset.status).toBe('connected');
    expect(root.querySelector('.jp-taskcell-status-address')!.textContent).toBe(
      'tcp://127.0.0.1:8786'
    );
    expect(root.querySelector('.jp-taskcell-stale')).toBeNull();
  });

  it('says an unreachable scheduler is unreachable, and dims its last snapshot', () => {
    const message = 'lost the connection to the scheduler at tcp://127.0.0.1:8786';
    const root = renderState(state(gpuSnapshot(1), { status: 'unreachable', message }));
    expect(root.querySelector('.jp-taskcell-status-unreachable')!.textContent).toBe(
      `Scheduler unreachabletcp://127.0.0.1:8786${message}`
    );
    expect(root.querySelector('.jp-taskcell-snapshot.jp-taskcell-stale')).not.toBeNull();
  });

  it('shows a cluster never reached without a snapshot', () => {
    const root = renderState(state(null, { status: 'unreachable', message: 'cannot reach' }));
    expect(root.querySelector('.jp-taskcell-snapshot')).toBeNull();
  });
});

describe('choosing a cluster', () => {
  const clusters: IClusterInfo[] = [
    {
      id: 'one',
      address: 'tcp://10.0.0.1:8786',
      sources: ['config'],
      notebooks: [],
      kernels: [],
      status: null
    },
    {
      id: 'two',
      address: 'tcp://10.0.0.2:8786',
      sources: ['kernel'],
      notebooks: [{ path: 'work/train.ipynb', name: 'train.ipynb', kernel_id: 'k' }],
      kernels: ['k'],
      status: 'connected'
    }
  ];

  it("prefers the current notebook's own cluster", () => {
    expect(pickCluster(clusters, 'work/train.ipynb', 'one')!.id).toBe('two');
  });

  it('else the one chosen, else the first', () => {
    expect(pickCluster(clusters, 'other.ipynb', 'two')!.id).toBe('two');
    expect(pickCluster(clusters, null, null)!.id).toBe('one');
    expect(pickCluster([], 'x.ipynb', null)).toBeNull();
  });

  it('labels a cluster by its notebooks', () => {
    expect(clusterLabel(clusters[1])).toBe('train.ipynb');
    expect(clusterLabel(clusters[0])).toBe('tcp://10.0.0.1:8786');
  });
});

describe('the planner', () => {
  const suggestion: ISuggestionInfo = {
    size: 2 ** 20,
    profile: 'light',
    memory: 2 ** 20,
    disk: 0,
    gpu: null,
    preset: 'small_task',
    request: { cpu: '2', memory: '4Gi' },
    line: '%%task small_task',
    fits: true,
    message: 'small_task fits',
    workers: [
      { address: 'tcp://a:1', name: 'gpu-box', able: true, reason: 'can run it' },
      { address: 'tcp://b:1', name: 'small-box', able: false, reason: 'lacks threads: asks 2, has 1' }
    ]
  };

  it('shows the line and which workers can run it', () => {
    const root = renderSuggestion(suggestion);
    expect(root.querySelector('.jp-taskcell-task-line')!.textContent).toBe('%%task small_task');
    expect(root.querySelector('.jp-taskcell-fit-count')!.textContent).toBe(
      '1 of 2 live workers can run it'
    );
    expect(root.querySelector('.jp-taskcell-nofit')!.textContent).toBe(
      'small-box: lacks threads: asks 2, has 1'
    );
  });

  it('shows no line when there is none, and no workers when none were checked', () => {
    const root = renderSuggestion({ ...suggestion, line: null, preset: null, fits: false, workers: [] });
    expect(root.querySelector('.jp-taskcell-task-line')).toBeNull();
    expect(root.querySelector('.jp-taskcell-fits')).toBeNull();
    expect(root.classList.contains('jp-taskcell-suggestion-nofit')).toBe(true);
  });

  it.each([
    ['x = 1', '%%task small_task\nx = 1'],
    ['', '%%task small_task\n'],
    ['%%task --gpu 1\nx = 1', '%%task small_task\nx = 1'],
    ['  %%task large_task\nx = 1', '%%task small_task\nx = 1'],
    ['# %%task in a comment\nx = 1', '%%task small_task\n# %%task in a comment\nx = 1']
  ])('puts the line at the top of %j', (source, expected) => {
    expect(withTaskLine(source, '%%task small_task')).toBe(expected);
  });
});
