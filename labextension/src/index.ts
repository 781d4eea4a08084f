import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { INotebookTracker } from '@jupyterlab/notebook';
import { LabIcon } from '@jupyterlab/ui-components';

import { LabActions } from './actions';
import { ResourcesClient } from './client';
import {
  addExportCommand,
  EXPORT_COMMAND,
  ExportButtonExtension
} from './export';
import { showErrorsAsErrors } from './errors';
import { answerTaskcellComm } from './kernelcomm';
import { TrackerContext } from './notebooks';
import { ResourcesPanel } from './panel';

export * from './api';
export { ResourcesPanel } from './panel';
export { SidebarModel } from './model';
export { PlannerModel } from './planner';
export { EXPORT_COMMAND, exportNotebook } from './export';

/** Opens the Resources sidebar (in the command palette too). */
export const OPEN_COMMAND = 'taskcell:open-resources';

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

export const resourcesIcon = new LabIcon({
  name: 'taskcell:resources',
  svgstr: ICON_SVG
});

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'taskcell:resources',
  description:
    'The Resources sidebar: live Dask worker resources and the preset planner.',
  autoStart: true,
  optional: [INotebookTracker, ILayoutRestorer, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker | null,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null
  ) => {
    tracker?.widgetAdded.connect((_, notebook) => {
      answerTaskcellComm(notebook);
      showErrorsAsErrors(notebook);
    });
    const context = new TrackerContext(tracker);
    const panel = new ResourcesPanel(
      new ResourcesClient(),
      context,
      new LabActions(app)
    );
    panel.title.icon = resourcesIcon;
    panel.title.label = '';
    panel.disposed.connect(() => context.dispose());
    app.shell.add(panel, 'right', { rank: 900 });
    restorer?.add(panel, panel.id);

    app.commands.addCommand(OPEN_COMMAND, {
      label: 'Show the taskcell Resources sidebar',
      caption:
        'Live Dask workers, their tasks, the cluster controls and the preset planner',
      execute: () => app.shell.activateById(panel.id)
    });
    palette?.addItem({ command: OPEN_COMMAND, category: 'taskcell' });
  }
};

/** "Export notebook to workflow module", in the command palette and on notebook toolbars. */
const exportPlugin: JupyterFrontEndPlugin<void> = {
  id: 'taskcell:export',
  description:
    "Export a notebook's %%task cells to a workflow module beside it, and open it.",
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
    app.docRegistry.addWidgetExtension(
      'Notebook',
      new ExportButtonExtension(app.commands)
    );
  }
};

export default [plugin, exportPlugin];
