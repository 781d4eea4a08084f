// @vitest-environment happy-dom
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { CommandRegistry } from '@lumino/commands';
import type { Widget } from '@lumino/widgets';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import type { IExportResult } from '../src/api';

// The dialogs and notifications the command shows, recorded instead.
const ui = vi.hoisted(() => ({
  showErrorMessage: vi.fn(async (_title: string, _error: unknown) => undefined),
  showDialog: vi.fn(),
  success: vi.fn(),
  warning: vi.fn()
}));
vi.mock('@jupyterlab/apputils', () => ({
  Dialog: {
    okButton: () => ({}),
    cancelButton: (options: object) => ({ ...options, accept: false }),
    warnButton: (options: object) => ({ ...options, accept: true })
  },
  Notification: { success: ui.success, warning: ui.warning },
  showDialog: ui.showDialog,
  showErrorMessage: ui.showErrorMessage
}));
// The real ones bring JupyterLab's web components, which happy-dom cannot style.
vi.mock('@jupyterlab/ui-components', () => ({
  LabIcon: class {
    constructor(readonly options: { name: string; svgstr: string }) {}
  },
  ToolbarButton: class {}
}));

import {
  EXPORT_COMMAND,
  EXPORT_LABEL,
  IExportSource,
  IModuleOpener,
  addExportCommand,
  exportAndOpen,
  exportNotebook
} from '../src/export';

const BASE = 'http://127.0.0.1:8888/lab-base/';
const WRITTEN: IExportResult = {
  path: 'work/04-export.py',
  target: 'dask',
  replaced: false,
  warnings: []
};
const HAND_WRITTEN = {
  message:
    "'work/04-export.py' exists and was not written by taskcell; " +
    'send "overwrite": true to replace it',
  reason: null
};

interface ISent {
  url: string;
  method: string;
  headers: Headers;
  body: unknown;
}

/** A Jupyter server that answers every request with `status` and `body`, and records them. */
function fakeServer(status: number, body: unknown, log: string[] = []) {
  return scriptedServer([[status, body]], log);
}

/** A Jupyter server that answers the n-th request with `replies[n]` (the last one after). */
function scriptedServer(replies: Array<[number, unknown]>, log: string[] = []) {
  const sent: ISent[] = [];
  const fetch = async (input: RequestInfo): Promise<Response> => {
    const [status, body] = replies[Math.min(sent.length, replies.length - 1)];
    const request = input as Request;
    const text = await request.text();
    sent.push({
      url: request.url,
      method: request.method,
      headers: request.headers,
      body: text ? JSON.parse(text) : null
    });
    log.push('POST');
    const payload = typeof body === 'string' ? body : JSON.stringify(body);
    return new Response(payload, {
      status,
      statusText: status === 200 ? 'OK' : 'Bad Request'
    });
  };
  const settings = ServerConnection.makeSettings({
    baseUrl: BASE,
    token: 'secret',
    fetch
  });
  return { settings, sent };
}

describe('exportNotebook', () => {
  afterEach(() => {
    document.cookie = '_xsrf=; expires=Thu, 01 Jan 1970 00:00:00 GMT';
  });

  it('POSTs the path and target as JSON to /taskcell/api/export with the credentials', async () => {
    document.cookie = '_xsrf=xsrf-value';
    const { settings, sent } = fakeServer(200, WRITTEN);
    const result = await exportNotebook(
      { path: 'work/04-export.ipynb', target: 'dask' },
      settings
    );
    expect(result).toEqual(WRITTEN);
    expect(sent).toHaveLength(1);
    expect(sent[0].url.split('?')[0]).toBe(`${BASE}taskcell/api/export`);
    expect(sent[0].method).toBe('POST');
    expect(sent[0].body).toEqual({
      path: 'work/04-export.ipynb',
      target: 'dask'
    });
    expect(sent[0].headers.get('Authorization')).toBe('token secret');
    expect(sent[0].headers.get('X-XSRFToken')).toBe('xsrf-value');
  });

  it("rejects with the server's message, which names the cell", async () => {
    const message =
      'cannot export bad.ipynb: cell 2 (%%task --cpu lots): --cpu ...';
    const { settings } = fakeServer(400, { message, reason: null });
    const error = await exportNotebook({ path: 'bad.ipynb' }, settings).catch(
      e => e
    );
    expect(error).toBeInstanceOf(ServerConnection.ResponseError);
    expect(error.message).toBe(message);
    expect(error.response.status).toBe(400);
  });

  it('rejects with the body as the message when it is not JSON', async () => {
    const { settings } = fakeServer(502, 'upstream went away');
    const error = await exportNotebook({ path: 'nb.ipynb' }, settings).catch(
      e => e
    );
    expect(error).toBeInstanceOf(ServerConnection.ResponseError);
    expect(error.message).toBe('upstream went away');
  });
});

/** A notebook's context that records saves, and a document manager that records opens. */
function fakeNotebook(dirty: boolean, log: string[]) {
  const source = {
    context: {
      ready: Promise.resolve(),
      model: { dirty },
      localPath: 'work/04-export.ipynb',
      save: vi.fn(async () => void log.push('save'))
    }
  };
  const editor = {
    context: {
      model: { dirty: false },
      revert: vi.fn(async () => void log.push('revert'))
    }
  };
  const docs = {
    open: null as typeof editor | null,
    findWidget: vi.fn(() => docs.open),
    openOrReveal: vi.fn((path: string) => void log.push(`open ${path}`))
  };
  return {
    source: source as unknown as IExportSource,
    docs: docs as typeof docs & IModuleOpener,
    editor,
    raw: source
  };
}

describe('exportAndOpen', () => {
  beforeEach(() => vi.clearAllMocks());

  it('saves unsaved changes, exports, then opens the module', async () => {
    const log: string[] = [];
    const { source, docs } = fakeNotebook(true, log);
    const { settings, sent } = fakeServer(200, WRITTEN, log);
    expect(await exportAndOpen(source, docs, 'dask', settings)).toEqual(
      WRITTEN
    );
    expect(log).toEqual(['save', 'POST', 'open work/04-export.py']);
    expect(sent[0].body).toEqual({
      path: 'work/04-export.ipynb',
      target: 'dask'
    });
    expect(ui.success).toHaveBeenCalledWith(
      'Exported the workflow module work/04-export.py',
      {
        autoClose: 4000
      }
    );
    expect(ui.showErrorMessage).not.toHaveBeenCalled();
  });

  it('saves no notebook without changes, and reloads an editor showing the module', async () => {
    const log: string[] = [];
    const { source, docs, editor } = fakeNotebook(false, log);
    docs.open = editor;
    const { settings } = fakeServer(200, WRITTEN, log);
    await exportAndOpen(source, docs, 'dask', settings);
    expect(log).toEqual(['POST', 'revert', 'open work/04-export.py']);
    expect(docs.findWidget).toHaveBeenCalledWith('work/04-export.py', null);
  });

  it('leaves an editor with unsaved changes as it is', async () => {
    const log: string[] = [];
    const { source, docs, editor } = fakeNotebook(false, log);
    editor.context.model.dirty = true;
    docs.open = editor;
    await exportAndOpen(
      source,
      docs,
      'dask',
      fakeServer(200, WRITTEN, log).settings
    );
    expect(log).toEqual(['POST', 'open work/04-export.py']);
  });

  it('shows the warnings in a notification, their details in a dialog', async () => {
    const { source, docs } = fakeNotebook(false, []);
    const warnings = [
      "taskcell: cell 2 (!echo hi): shell escapes cannot run outside IPython; '!echo hi' kept " +
        'as a comment'
    ];
    const { settings } = fakeServer(200, { ...WRITTEN, warnings });
    await exportAndOpen(source, docs, 'dask', settings);
    expect(ui.success).not.toHaveBeenCalled();
    expect(ui.warning).toHaveBeenCalledTimes(1);
    const [message, options] = ui.warning.mock.calls[0];
    expect(message).toBe(
      'Exported work/04-export.py; one cell part kept only as comments'
    );
    options.actions[0].callback(new MouseEvent('click'));
    const shown = ui.showDialog.mock.calls[0][0];
    expect(shown.body.node.textContent).toBe(
      warnings[0].replace('taskcell: ', '')
    );
  });

  it('asks before replacing a file taskcell did not write, then replaces it', async () => {
    const log: string[] = [];
    const { source, docs } = fakeNotebook(false, log);
    const replaced = { ...WRITTEN, replaced: true };
    const { settings, sent } = scriptedServer(
      [
        [409, HAND_WRITTEN],
        [200, replaced]
      ],
      log
    );
    ui.showDialog.mockResolvedValueOnce({ button: { accept: true } });
    expect(await exportAndOpen(source, docs, 'dask', settings)).toEqual(
      replaced
    );
    expect(log).toEqual(['POST', 'POST', 'open work/04-export.py']);
    expect(sent.map(s => s.body)).toEqual([
      { path: 'work/04-export.ipynb', target: 'dask' },
      { path: 'work/04-export.ipynb', target: 'dask', overwrite: true }
    ]);
    const asked = ui.showDialog.mock.calls[0][0];
    expect(asked.title).toBe('Replace?');
    expect(asked.body).toContain(
      'work/04-export.py exists and was not written by taskcell'
    );
    expect(asked.buttons.map((b: { label: string }) => b.label)).toEqual([
      'Keep it',
      'Replace'
    ]);
    expect(ui.showErrorMessage).not.toHaveBeenCalled();
  });

  it('keeps the file, and opens nothing, when the user says so', async () => {
    const log: string[] = [];
    const { source, docs } = fakeNotebook(false, log);
    const { settings } = fakeServer(409, HAND_WRITTEN, log);
    ui.showDialog.mockResolvedValueOnce({ button: { accept: false } });
    expect(await exportAndOpen(source, docs, 'dask', settings)).toBeNull();
    expect(log).toEqual(['POST']);
    expect(ui.showErrorMessage).not.toHaveBeenCalled();
    expect(ui.success).not.toHaveBeenCalled();
  });

  it('shows an error in a dialog and opens nothing', async () => {
    const log: string[] = [];
    const { source, docs } = fakeNotebook(false, log);
    const message =
      'cannot export 04-export.ipynb: cell 2 (%%task --cpu lots): --cpu ...';
    const { settings } = fakeServer(400, { message, reason: null }, log);
    expect(await exportAndOpen(source, docs, 'dask', settings)).toBeNull();
    expect(log).toEqual(['POST']);
    expect(ui.showErrorMessage).toHaveBeenCalledTimes(1);
    const [title, error] = ui.showErrorMessage.mock.calls[0];
    expect(title).toBe(EXPORT_LABEL);
    expect((error as Error).message).toBe(message);
  });
});

describe('the taskcell:export-notebook command', () => {
  function tracker(current: Partial<NotebookPanel> | null): INotebookTracker {
    const panels = current ? [current] : [];
    return {
      currentWidget: current,
      find: (fn: (p: NotebookPanel) => boolean) =>
        panels.find(p => fn(p as NotebookPanel))
    } as unknown as INotebookTracker;
  }

  it('is labelled, and disabled without a notebook', () => {
    const commands = new CommandRegistry();
    addExportCommand(commands, tracker(null), fakeNotebook(false, []).docs);
    expect(commands.label(EXPORT_COMMAND)).toBe(
      'Export notebook to workflow module'
    );
    expect(commands.isEnabled(EXPORT_COMMAND)).toBe(false);
  });

  it('exports the notebook named by path= to the target= asked for', async () => {
    const fetch = vi.fn(
      async () => new Response(JSON.stringify({ ...WRITTEN, target: 'flyte' }))
    );
    const settings = ServerConnection.makeSettings({ baseUrl: BASE, fetch });
    const spy = vi
      .spyOn(ServerConnection, 'makeSettings')
      .mockReturnValue(settings);
    try {
      const { raw, docs } = fakeNotebook(false, []);
      const panel = {
        ...raw,
        context: { ...raw.context, path: 'RTC:work/04-export.ipynb' }
      };
      const commands = new CommandRegistry();
      addExportCommand(
        commands,
        tracker(panel as unknown as NotebookPanel),
        docs
      );
      const args = { path: 'RTC:work/04-export.ipynb', target: 'flyte' };
      expect(commands.isEnabled(EXPORT_COMMAND, args)).toBe(true);
      expect(commands.isEnabled(EXPORT_COMMAND, { path: 'other.ipynb' })).toBe(
        false
      );
      await commands.execute(EXPORT_COMMAND, args);
      const request = (fetch.mock.calls[0] as unknown[])[0] as Request;
      expect(await request.json()).toEqual({
        path: 'work/04-export.ipynb',
        target: 'flyte'
      });
      expect(docs.openOrReveal).toHaveBeenCalledWith('work/04-export.py');
    } finally {
      spy.mockRestore();
    }
  });

  it('asks which target when none is named, and exports to the one chosen', async () => {
    const fetch = vi.fn(
      async () => new Response(JSON.stringify({ ...WRITTEN, target: 'latch' }))
    );
    const settings = ServerConnection.makeSettings({ baseUrl: BASE, fetch });
    const spy = vi
      .spyOn(ServerConnection, 'makeSettings')
      .mockReturnValue(settings);
    const offered: string[][] = [];
    ui.showDialog.mockImplementation(async (options: { body: Widget }) => {
      const select = options.body.node.querySelector('select')!;
      offered.push([...select.options].map(o => o.value));
      return { button: { accept: true }, value: 'latch' };
    });
    try {
      const { raw, docs } = fakeNotebook(false, []);
      const commands = new CommandRegistry();
      addExportCommand(
        commands,
        tracker(raw as unknown as NotebookPanel),
        docs
      );
      await commands.execute(EXPORT_COMMAND, {});
      expect(offered).toEqual([['dask', 'flyte', 'latch']]);
      const request = (fetch.mock.calls[0] as unknown[])[0] as Request;
      expect((await request.json()).target).toBe('latch');
      // Cancelled: nothing is asked of the server.
      ui.showDialog.mockResolvedValueOnce({
        button: { accept: false },
        value: null
      });
      await commands.execute(EXPORT_COMMAND, {});
      expect(fetch).toHaveBeenCalledTimes(1);
    } finally {
      spy.mockRestore();
      ui.showDialog.mockReset();
    }
  });
});
