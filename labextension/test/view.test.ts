// @vitest-environment happy-dom
/**
 * The sidebar shows what the notebook panel shows: `view-cases.json` holds snapshots and the
 * Python view of each (`tests/planner/test_view_agreement.py` writes it and checks it is current).
 */
import { describe, expect, it } from 'vitest';

import { renderSnapshot } from '../src/render';
import type { ISnapshot, ISnapshotView } from '../src/snapshot';
import { snapshotView } from '../src/view';
import cases from './view-cases.json';

const all = cases.cases as unknown as Array<{ name: string; snapshot: ISnapshot; view: ISnapshotView }>;

function texts(root: HTMLElement, selector: string): string[] {
  return [...root.querySelectorAll(selector)].map(node => node.textContent ?? '');
}

describe.each(all)('$name', ({ snapshot, view }) => {
  it('computes the same view as the Python', () => {
    expect(snapshotView(snapshot, cases.now)).toEqual(view);
  });

  it('shows its groups, workers and labels in that order', () => {
    const root = renderSnapshot(snapshot, cases.now);
    expect(texts(root, '.jp-taskcell-group-title')).toEqual(view.groups.map(g => g.title));
    expect(texts(root, '.jp-taskcell-worker-head')).toEqual(
      view.groups.flatMap(g => g.workers.map(w => w.name))
    );
    expect(texts(root, '.jp-taskcell-worker .jp-taskcell-resource-label')).toEqual(
      view.groups.flatMap(g => g.workers.flatMap(w => w.bars.map(b => b.label)))
    );
    expect(texts(root, '.jp-taskcell-totals .jp-taskcell-resource-label')).toEqual(
      view.totals.map(b => b.label)
    );
    expect(texts(root, '.jp-taskcell-folded')).toEqual(
      view.groups.flatMap(g => (g.folded ? [g.folded] : []))
    );
    expect(texts(root, '.jp-taskcell-summary')).toEqual([view.summary]);
    expect(texts(root, '.jp-taskcell-queue .jp-taskcell-task-name')).toEqual(
      view.waiting.map(t => t.name)
    );
    expect(texts(root, '.jp-taskcell-queue .jp-taskcell-task-request')).toEqual(
      view.waiting.map(t => t.request)
    );
    expect(texts(root, '.jp-taskcell-queue .jp-taskcell-heading')).toEqual([view.waiting_title]);
    expect(texts(root, '.jp-taskcell-ended .jp-taskcell-heading')).toEqual([view.ended_title]);
    expect(texts(root, '.jp-taskcell-ended-detail')).toEqual(view.ended.map(t => t.detail));
    expect(texts(root, '.jp-taskcell-ended-error')).toEqual(
      view.ended.flatMap(t => (t.error ? [t.error] : []))
    );
    expect([...root.querySelectorAll<HTMLElement>('.jp-taskcell-strip')].map(s => s.title)).toEqual(
      view.strips.map(s => s.title)
    );
    expect(root.querySelector<HTMLAnchorElement>('.jp-taskcell-dashboard')?.href ?? null).toBe(
      view.dashboard
    );
    expect(texts(root, '.jp-taskcell-pools .jp-taskcell-heading')).toEqual(
      view.pools.length ? [view.pools_title] : []
    );
    expect(texts(root, '.jp-taskcell-pool-title')).toEqual(view.pools.map(p => p.title));
    expect(texts(root, '.jp-taskcell-pool-shape')).toEqual(view.pools.map(p => p.shape));
    expect(texts(root, '.jp-taskcell-pool-detail')).toEqual(view.pools.map(p => p.detail));
    expect(texts(root, '.jp-taskcell-pool-worker-state')).toEqual(
      view.pools.flatMap(p => p.workers.map(w => w.label))
    );
    expect(
      [...root.querySelectorAll<HTMLElement>('.jp-taskcell-pool-worker')].map(w => w.dataset.state)
    ).toEqual(view.pools.flatMap(p => p.workers.map(w => w.state)));
  });
});
