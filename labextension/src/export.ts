/**
 * "Export notebook to workflow module": the server writes the notebook's workflow module beside
 * it (`POST /taskcell/api/export`, taskcell/extension/export_handler.py), then JupyterLab opens
 * it. A file there that taskcell did not write is replaced only once the user says so. The
 * command is in the palette and on every notebook's toolbar; see `exportPlugin` in index.ts.
 */
import {
  Dialog,
  Notification,
  showDialog,
  showErrorMessage
} from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import type { IDocumentManager } from '@jupyterlab/docmanager';
import type { DocumentRegistry } from '@jupyterlab/docregistry';
import type {
  INotebookModel,
  INotebookTracker,
  NotebookPanel
} from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { LabIcon, ToolbarButton } from '@jupyterlab/ui-components';
import type { CommandRegistry } from '@lumino/commands';
import type { IDisposable } from '@lumino/disposable';
import { Widget } from '@lumino/widgets';

import {
  TARGETS as EXPORT_TARGETS,
  type Target as ExportTarget,
  type IExportRequest,
  type IExportResult
} from './api';
import { readReply } from './client';

export const EXPORT_COMMAND = 'taskcell:export-notebook';
export const EXPORT_LABEL = 'Export notebook to workflow module';

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M5 2h9l5 5v5h-2V8h-4V4H7v16h5v2H5a1 1 0 0 1-1-1V3a1 1 0 0 1 1-1z"/>
    <path d="M17 13.5l4.5 4-4.5 4V19h-4v-3h4z"/>
  </g>
</svg>`;

export const exportIcon = new LabIcon({
  name: 'taskcell:export',
  svgstr: ICON_SVG
});

/**
 * Ask the server to export a notebook; resolves to the module it wrote.
 *
 * Rejects with a `ServerConnection.ResponseError` whose message is the server's (for a notebook
 * that cannot be exported, it names the cell), or a `NetworkError`.
 */
export async function exportNotebook(
  request: IExportRequest,
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<IExportResult> {
  const url = URLExt.join(settings.baseUrl, 'taskcell', 'api', 'export');
  const init: RequestInit = { method: 'POST', body: JSON.stringify(request) };
  const response = await ServerConnection.makeRequest(url, init, settings);
  return readReply<IExportResult>(response);
}

/** What each target writes, as the dialog offers it. */
export const TARGET_LABELS: Record<ExportTarget, string> = {
  dask: 'Dask: runs as python analysis.py, with the notebook’s results',
  flyte: 'Flyte 2: a flyte.TaskEnvironment per request',
  latch: 'Latch: a @workflow latch register can register'
};

/** A select of the targets, for the dialog's body, `chosen` selected. */
class TargetChoice extends Widget {
  constructor(chosen: ExportTarget) {
    super({ node: document.createElement('label') });
    this.addClass('jp-taskcell-export-target');
    this.node.textContent = 'Target ';
    this._select = document.createElement('select');
    this._select.className = 'jp-mod-styled';
    for (const target of EXPORT_TARGETS) {
      const option = document.createElement('option');
      option.value = target;
      option.textContent = TARGET_LABELS[target];
      option.selected = target === chosen;
      this._select.append(option);
    }
    this.node.append(this._select);
  }

  getValue(): ExportTarget {
    return this._select.value as ExportTarget;
  }

  private _select: HTMLSelectElement;
}

let lastTarget: ExportTarget = 'dask';

/** Ask which target to export to (the last one chosen first); null when the user cancels. */
export async function chooseTarget(): Promise<ExportTarget | null> {
  const answer = await showDialog<ExportTarget>({
    title: EXPORT_LABEL,
    body: new TargetChoice(lastTarget),
    buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Export' })],
    defaultButton: 1
  });
  if (!answer.button.accept || answer.value === null) {
    return null;
  }
  lastTarget = answer.value;
  return answer.value;
}

/** What an export needs of a notebook: its document context. */
export interface IExportSource {
  context: Pick<
    DocumentRegistry.IContext<INotebookModel>,
    'ready' | 'model' | 'save' | 'localPath'
  >;
}

/** What an export needs of JupyterLab's document manager. */
export type IModuleOpener = Pick<
  IDocumentManager,
  'findWidget' | 'openOrReveal'
>;

/**
 * Export, and when the server refuses to replace a file taskcell did not write (409), ask the
 * user whether to replace it, then export again with `overwrite`.
 *
 * Resolves to the server's answer, or `null` when the user keeps the file.
 */
export async function exportAsking(
  request: IExportRequest,
  settings?: ServerConnection.ISettings
): Promise<IExportResult | null> {
  try {
    return await exportNotebook(request, settings);
  } catch (error) {
    if (
      !(error instanceof ServerConnection.ResponseError) ||
      error.response.status !== 409
    ) {
      throw error;
    }
  }
  const module = request.path.replace(/\.ipynb$/i, '.py');
  const answer = await showDialog({
    title: 'Replace?',
    body:
      `${module} exists and was not written by taskcell. ` +
      'Replace it with the workflow module? Its contents will be lost.',
    buttons: [
      Dialog.cancelButton({ label: 'Keep it' }),
      Dialog.warnButton({ label: 'Replace' })
    ],
    defaultButton: 0 // Enter keeps the file
  });
  if (!answer.button.accept) {
    return null;
  }
  return await exportNotebook({ ...request, overwrite: true }, settings);
}

/**
 * Save the notebook if it has unsaved changes, export it, and open the module (reloading an
 * editor that already shows it). Errors are shown in a dialog, warnings as a notification.
 *
 * Resolves to the server's answer, or `null` when the export failed or the user kept a file
 * taskcell did not write.
 */
export async function exportAndOpen(
  source: IExportSource,
  docManager: IModuleOpener,
  target: ExportTarget = 'dask',
  settings?: ServerConnection.ISettings
): Promise<IExportResult | null> {
  const context = source.context;
  let result: IExportResult | null;
  try {
    await context.ready;
    // The server exports the file on disk: it must be what the user sees.
    if (context.model.dirty) {
      await context.save();
    }
    result = await exportAsking({ path: context.localPath, target }, settings);
    if (result === null) {
      return null;
    }
    const open = docManager.findWidget(result.path, null);
    if (open && !open.context.model.dirty) {
      await open.context.revert();
    }
  } catch (error) {
    await showErrorMessage(EXPORT_LABEL, error as Error);
    return null;
  }
  docManager.openOrReveal(result.path);
  report(result);
  return result;
}

function report(result: IExportResult): void {
  const count = result.warnings.length;
  if (count === 0) {
    Notification.success(`Exported the workflow module ${result.path}`, {
      autoClose: 4000
    });
    return;
  }
  const cells = count === 1 ? 'one cell part' : `${count} cell parts`;
  Notification.warning(
    `Exported ${result.path}; ${cells} kept only as comments`,
    {
      autoClose: false,
      actions: [
        {
          label: 'Show details',
          callback: () =>
            void showDialog({
              title: `Kept as comments in ${result.path}`,
              body: warningList(result.warnings),
              buttons: [Dialog.okButton()]
            })
        }
      ]
    }
  );
}

function warningList(warnings: string[]): Widget {
  const list = document.createElement('ul');
  list.className = 'jp-taskcell-export-warnings';
  for (const warning of warnings) {
    const item = document.createElement('li');
    item.textContent = warning.replace(/^taskcell: /, '');
    list.appendChild(item);
  }
  return new Widget({ node: list });
}

/** The notebook a command call means: the one named by `args.path`, else the current one. */
function notebookFor(
  tracker: INotebookTracker,
  path: unknown
): NotebookPanel | null {
  if (typeof path === 'string') {
    return tracker.find(panel => panel.context.path === path) ?? null;
  }
  return tracker.currentWidget;
}

/**
 * Add `taskcell:export-notebook`. Arguments, both optional: `path`, the notebook's path (the
 * current notebook when left out), and `target`, `'dask'`, `'flyte'` or `'latch'` (asked for in
 * a dialog when left out).
 */
export function addExportCommand(
  commands: CommandRegistry,
  tracker: INotebookTracker,
  docManager: IModuleOpener
): IDisposable {
  const running = new Set<NotebookPanel>();
  return commands.addCommand(EXPORT_COMMAND, {
    label: EXPORT_LABEL,
    caption:
      "Write the notebook's workflow module (.py) beside it, then open it",
    icon: exportIcon,
    isEnabled: args => notebookFor(tracker, args.path) !== null,
    execute: async args => {
      const panel = notebookFor(tracker, args.path);
      if (!panel || running.has(panel)) {
        return null;
      }
      const target =
        typeof args.target === 'string'
          ? (args.target as ExportTarget)
          : await chooseTarget();
      if (target === null) {
        return null;
      }
      running.add(panel);
      try {
        return await exportAndOpen(panel, docManager, target);
      } finally {
        running.delete(panel);
      }
    }
  });
}

/** The command's button on every notebook's toolbar. */
export class ExportButtonExtension implements DocumentRegistry.IWidgetExtension<
  NotebookPanel,
  INotebookModel
> {
  constructor(commands: CommandRegistry) {
    this._commands = commands;
  }

  createNew(panel: NotebookPanel): IDisposable {
    const button = new ToolbarButton({
      className: 'jp-taskcell-export-button',
      icon: exportIcon,
      tooltip: EXPORT_LABEL,
      // The path at the time of the click: the notebook may have been renamed.
      onClick: () =>
        void this._commands.execute(EXPORT_COMMAND, {
          path: panel.context.path
        })
    });
    const name = 'taskcell-export';
    if (!panel.toolbar.insertAfter('cellType', name, button)) {
      panel.toolbar.addItem(name, button);
    }
    return button;
  }

  private _commands: CommandRegistry;
}
