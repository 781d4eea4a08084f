import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { LabIcon } from '@jupyterlab/ui-components';
import { ISignal, Signal } from '@lumino/signaling';

import { ResourcesClient } from './client';
import { addExportCommand, EXPORT_COMMAND, ExportButtonExtension } from './export';
import { INotebookContext, ResourcesPanel } from './panel';
import { withTaskLine } from './render';
import { answerTaskcellComm } from './kernelcomm';

export * from './api';
export { ResourcesPanel, OccupancyView } from './panel';
export { PlannerForm } from './planner';
export { EXPORT_COMMAND, exportNotebook } from './export';

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <rect x="3" y="4" width="18" height="4" rx="1" opacity="0.35"/>
    <rect x="3" y="4" width="11" height="4" rx="1"/>
    <rect x="3" y="10" width="18" height="4" rx="1" opacity="0.35"/>
    <rect x="3" y="10" width="6" height="4" rx="1"/>
    <rect x="3" y="16" width="18" height="4" rx="1" opacity="0.35"/>
    <rect x="3" y="16" width="15" height="4" rx="1"/>
  </g>
</svg>`;

export const resourcesIcon = new LabIcon({ name: 'taskcell:resources', svgstr: ICON_SVG });

/** The notebooks as the sidebar sees them, over JupyterLab's notebook tracker. */
class TrackerContext implements INotebookContext {
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

  dispose(): void {
    this._tracker?.currentChanged.disconnect(this._onCurrent, this);
    this._watch(null);
    Signal.clearData(this);
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

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'taskcell:resources',
  description: 'The Resources sidebar: live Dask worker resources and the preset planner.',
  autoStart: true,
  optional: [INotebookTracker, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker | null,
    restorer: ILayoutRestorer | null
  ) => {
    tracker?.widgetAdded.connect((_, notebook) => answerTaskcellComm(notebook));
    const context = new TrackerContext(tracker);
    const panel = new ResourcesPanel(new ResourcesClient(), context);
    panel.title.icon = resourcesIcon;
    panel.title.label = '';
    panel.disposed.connect(() => context.dispose());
    app.shell.add(panel, 'right', { rank: 900 });
    restorer?.add(panel, panel.id);

    app.commands.addCommand('taskcell:open-resources', {
      label: 'Show the taskcell Resources sidebar',
      execute: () => app.shell.activateById(panel.id)
    });
  }
};

/** "Export notebook to workflow module", in the command palette and on notebook toolbars. */
const exportPlugin: JupyterFrontEndPlugin<void> = {
  id: 'taskcell:export',
  description: "Export a notebook's %%task cells to a workflow module beside it, and open it.",
  autoStart: true,
  requires: [INotebookTracker, IDocumentManager],
  optional: [ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    docManager: IDocumentManager,
    palette: ICommandPalette | null
  ) => {
    addExportCommand(app.commands, tracker, docManager);
    palette?.addItem({ command: EXPORT_COMMAND, category: 'taskcell' });
    app.docRegistry.addWidgetExtension('Notebook', new ExportButtonExtension(app.commands));
  }
};

export default [plugin, exportPlugin];
