import type { INotebookTracker } from '@jupyterlab/notebook';
import { Signal } from '@lumino/signaling';
import { describe, expect, it } from 'vitest';

import { attachCode, TrackerContext } from '../src/notebooks';

/** A tracker whose notebook in focus has a kernel that answers every request with `reply`. */
function trackerWith(reply: Record<string, unknown>): {
  tracker: INotebookTracker;
  requests: Array<Record<string, unknown>>;
} {
  const requests: Array<Record<string, unknown>> = [];
  const owner = {};
  const kernel = {
    requestExecute: (content: Record<string, unknown>) => {
      requests.push(content);
      return { done: Promise.resolve({ content: reply }) };
    }
  };
  const tracker = {
    currentChanged: new Signal(owner),
    currentWidget: {
      context: { path: 'demo.ipynb' },
      sessionContext: {
        session: { kernel },
        statusChanged: new Signal(owner),
        kernelChanged: new Signal(owner)
      }
    }
  };
  return { tracker: tracker as unknown as INotebookTracker, requests };
}

describe('attaching a notebook to a cluster', () => {
  it('loads taskcell and runs %task_cluster, quietly', async () => {
    const { tracker, requests } = trackerWith({ status: 'ok' });
    const context = new TrackerContext(tracker);
    expect(context.hasKernel()).toBe(true);
    await context.attachCluster('tcp://127.0.0.1:9000');
    expect(requests).toEqual([
      {
        code: '%load_ext taskcell\n%task_cluster tcp://127.0.0.1:9000',
        silent: true,
        store_history: false,
        user_expressions: {}
      }
    ]);
    context.dispose();
  });

  it("rejects with the kernel's error", async () => {
    const { tracker } = trackerWith({
      status: 'error',
      ename: 'ClusterError',
      evalue: 'cannot reach the scheduler at tcp://127.0.0.1:9000',
      traceback: []
    });
    const context = new TrackerContext(tracker);
    await expect(context.attachCluster('tcp://127.0.0.1:9000')).rejects.toThrow(
      'ClusterError: cannot reach the scheduler at tcp://127.0.0.1:9000'
    );
    context.dispose();
  });

  it('runs nothing but the magic: an address with a line break is refused', () => {
    expect(attachCode('tls://10.0.0.1:8786')).toBe(
      '%load_ext taskcell\n%task_cluster tls://10.0.0.1:8786'
    );
    expect(() => attachCode('tcp://h:1\nimport os')).toThrow(
      'not a scheduler address'
    );
    expect(() => attachCode('h:1')).toThrow('not a scheduler address');
    // What IPython would expand, or split into lines, in a magic's argument.
    for (const bad of [
      "tcp://{__import__('os').system('id')}:1",
      'tcp://$HOME:1',
      'tcp://h:1\x85import os',
      'tcp://h:1 x'
    ]) {
      expect(() => attachCode(bad)).toThrow('not a scheduler address');
    }
    expect(attachCode('tcp://[::1]:8786')).toBe(
      '%load_ext taskcell\n%task_cluster tcp://[::1]:8786'
    );
  });
});
