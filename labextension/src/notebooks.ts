/**
 * The notebooks as the sidebar sees them, over JupyterLab's notebook tracker: which one is in
 * focus, its active cell, and its kernel, which measures a variable for the planner and is
 * pointed at a cluster by the sidebar's Attach.
 */
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import type { INotebookContext } from './model';

/**
 * Put `line` at the top of a cell's source, replacing a `%%task` line already there.
 */
export function withTaskLine(source: string, line: string): string {
  const [first, ...rest] = source.split('\n');
  if (first.trimStart().startsWith('%%task')) {
    return [line, ...rest].join('\n');
  }
  return source ? `${line}\n${source}` : `${line}\n`;
}

/** The Python a kernel evaluates to measure its variable `name` (an identifier). */
export function measureExpression(name: string): string {
  return `__import__('taskcell.planner.sizing', fromlist=['input_size']).input_size(${name})`;
}

/**
 * The code a kernel runs to use the cluster at `address`: taskcell's magics loaded (a no-op
 * where they are), then `%task_cluster`, which connects and records the cluster for the server.
 * Loaded in the same run as the choice, the embedded cluster is never started early meanwhile.
 */
export function attachCode(address: string): string {
  // The address is a magic's argument, which IPython expands (`{expr}`, `$name`) and splits
  // into lines (`\x85` too): only the characters of a URL's host, port and path may pass.
  if (!/^[a-z][a-z0-9+.-]*:\/\/[A-Za-z0-9._~:/@%[\]-]+$/i.test(address)) {
    throw new Error(`not a scheduler address: ${JSON.stringify(address)}`);
  }
  return `%load_ext taskcell\n%task_cluster ${address}`;
}

export class TrackerContext implements INotebookContext {
  constructor(tracker: INotebookTracker | null) {
    this._tracker = tracker;
    tracker?.currentChanged.connect(this._onCurrent, this);
    this._onCurrent();
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  currentPath(): string | null {
    return this._tracker?.currentWidget?.context.path ?? null;
  }

  insertTaskLine(line: string): boolean {
    const cell = this._tracker?.activeCell;
    if (!cell || cell.model.type !== 'code') {
      return false;
    }
    const shared = cell.model.sharedModel;
    shared.setSource(withTaskLine(shared.getSource(), line));
    return true;
  }

  hasKernel(): boolean {
    return this._kernel() !== null;
  }

  async measureVariable(name: string): Promise<number | null> {
    const kernel = this._kernel();
    if (!kernel) {
      return null;
    }
    const reply = await quietly(kernel, '', { size: measureExpression(name) });
    const content = reply as {
      user_expressions?: Record<string, unknown>;
    };
    const result = content.user_expressions?.size as
      | { status: 'ok'; data: Record<string, string> }
      | { status: 'error'; ename: string; evalue: string }
      | undefined;
    if (!result) {
      return null;
    }
    if (result.status === 'error') {
      if (result.ename === 'NameError') {
        return null; // not a variable: the server reads it as a size or files
      }
      throw new Error(result.evalue || result.ename);
    }
    return Number(result.data['text/plain']);
  }

  async attachCluster(address: string): Promise<void> {
    const kernel = this._kernel();
    if (!kernel) {
      throw new Error('the notebook has no kernel');
    }
    const reply = await quietly(kernel, attachCode(address));
    if (reply.status === 'error') {
      throw new Error(`${reply.ename}: ${reply.evalue}`);
    }
    if (reply.status === 'abort') {
      throw new Error('the kernel aborted the request');
    }
  }

  dispose(): void {
    this._tracker?.currentChanged.disconnect(this._onCurrent, this);
    this._watch(null);
    Signal.clearData(this);
  }

  /** The kernel of the notebook in focus, or null. */
  private _kernel(): Kernel.IKernelConnection | null {
    return this._tracker?.currentWidget?.sessionContext.session?.kernel ?? null;
  }

  private _onCurrent(): void {
    this._watch(this._tracker?.currentWidget ?? null);
    this._changed.emit();
  }

  /** Follow the kernel of the notebook in focus: a cell that starts may record a cluster. */
  private _watch(panel: NotebookPanel | null): void {
    this._panel?.sessionContext.statusChanged.disconnect(this._onStatus, this);
    this._panel?.sessionContext.kernelChanged.disconnect(this._onStatus, this);
    this._panel = panel;
    panel?.sessionContext.statusChanged.connect(this._onStatus, this);
    panel?.sessionContext.kernelChanged.connect(this._onStatus, this);
  }

  private _onStatus(): void {
    this._changed.emit();
  }

  private _tracker: INotebookTracker | null;
  private _panel: NotebookPanel | null = null;
  private _changed = new Signal<this, void>(this);
}

/**
 * Run `code` in `kernel` as the sidebar's own request: no output in a cell, nothing in the
 * notebook's history or execution count. The reply's content (`status`, and `ename` and
 * `evalue` where the code raised).
 */
async function quietly(
  kernel: Kernel.IKernelConnection,
  code: string,
  expressions: Record<string, string> = {}
): Promise<KernelMessage.IExecuteReplyMsg['content']> {
  const reply = await kernel.requestExecute({
    code,
    silent: true,
    store_history: false,
    user_expressions: expressions
  }).done;
  return reply.content;
}
