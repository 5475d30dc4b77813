// make lab's one front-end plugin, written by hand: JupyterLab loads a prebuilt ("federated") extension as a script
// that registers a module container in window._JUPYTERLAB (docs/report.md, "JupyterLab"). No build step, no npm.
//
// Lab drops a Run All asked while a notebook's kernel is still initializing and says so in a notice that stays open
// (jupyterlab/jupyterlab#8490). Here the request is kept: once that kernel is ready, the notice is closed and the
// notebook's cells are run, as asked.
(function () {
  "use strict";
  var RUN_ALL = ["notebook:run-all-cells", "runmenu:run-all"];
  var shared = null; // webpack's shared scope: Lab's own @jupyterlab/apputils (its Notification) is taken from it

  function apputils() {
    var versions = shared && shared["@jupyterlab/apputils"];
    if (!versions) return Promise.resolve(null);
    var number = function (version) { return version.split(".").map(function (part) { return parseInt(part, 10) || 0; }); };
    // the version Lab itself took (webpack marks it loaded); the newest only where none is marked
    var names = Object.keys(versions), taken = names.filter(function (version) { return versions[version].loaded; });
    var chosen = (taken.length ? taken : names).sort(function (a, b) {
      var x = number(a), y = number(b);
      for (var i = 0; i < Math.max(x.length, y.length); i++) if ((x[i] || 0) !== (y[i] || 0)) return (x[i] || 0) - (y[i] || 0);
      return 0;
    }).pop();
    return versions[chosen].get().then(function (factory) { return factory(); });
  }

  function stillInitializingNotices(lab, path) {  // Lab's "... still initializing" warning names the notebook
    return lab.Notification.manager.notifications.filter(function (notice) {
      return notice.type === "warning" && notice.message.indexOf(path) >= 0;
    });
  }

  function whenIdle(context) {
    return context.ready.then(function () {
      return new Promise(function (resolve) {
        function check() {
          var kernel = context.session && context.session.kernel;
          if (kernel && kernel.connectionStatus === "connected" && kernel.status === "idle") {
            context.statusChanged.disconnect(check);
            context.connectionStatusChanged.disconnect(check);
            resolve();
          }
        }
        context.statusChanged.connect(check);
        context.connectionStatusChanged.connect(check);
        check();
      });
    });
  }

  var plugin = {
    id: "bench-utils-lab:run-all-once-ready",
    description: "A Run All asked before the kernel is ready runs once it is; Lab's notice is closed.",
    autoStart: true,
    activate: function (app) {
      var waiting = new Set(); // notebooks with a Run All kept for their kernel
      app.commands.commandExecuted.connect(function (_, executed) {
        if (RUN_ALL.indexOf(executed.id) < 0) return;
        var panel = app.shell.currentWidget;
        var context = panel && panel.sessionContext;
        if (!context || !panel.content || context.kernelDisplayStatus !== "initializing" || waiting.has(panel)) return;
        // kept only where Lab dropped it: it said so (a user who turned that notice off has the cells run by Lab)
        Promise.all([Promise.resolve(executed.result), apputils()]).then(function (done) {
          var ran = done[0], lab = done[1];
          if (ran !== false || (lab && !stillInitializingNotices(lab, context.path).length) || waiting.has(panel)) return;
          waiting.add(panel);
          panel.disposed.connect(function () { waiting.delete(panel); });
          return whenIdle(context).then(function () {
            waiting.delete(panel);
            if (panel.isDisposed) return;
            try {  // the notice closed, and a word said; the cells are run whatever happens here
              if (lab) {
                stillInitializingNotices(lab, context.path).forEach(function (notice) { lab.Notification.dismiss(notice.id); });
                lab.Notification.info("The kernel of " + context.path + " is ready: its cells run now, as asked.",
                                      {autoClose: 8000});
              }
            } finally {
              return app.commands.execute("notebook:run-all-cells", {widgetId: panel.id});  // that notebook's
            }
          });
        }).catch(function (problem) { console.warn("bench-utils-lab: " + problem); });
      });
    }
  };

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB["bench-utils-lab"] = {
    init: function (scope) { shared = scope; return Promise.resolve(); },
    get: function (module) {
      if (module !== "./extension") return Promise.reject(new Error("bench-utils-lab has no module " + module));
      return Promise.resolve(function () { return {__esModule: true, "default": [plugin]}; });
    }
  };
})();
