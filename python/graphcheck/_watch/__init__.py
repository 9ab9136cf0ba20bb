"""The server debug flag: :func:`graphcheck.watch`, its check points and ``GRAPHCHECK=1`` (private).

One module per concept; imports go one way, down this list (a test imports each module alone
in a fresh interpreter and checks that no module imports one above it):

- :mod:`.process`: the process's one watch (:func:`~.process.watch`,
  :func:`~.process.current_watch`, :func:`~.process.checkpoint`), what ``graphcheck``
  re-exports;
- :mod:`.watch`: :class:`~.watch.Watch`, the graphs it records and its check points;
- :mod:`.graphs`: one recorded graph and its capture, whose model is resolved anew at each
  epoch;
- :mod:`.graph_pools`: the caching allocator's segments of CUDA graph pools, graph memory in
  every epoch of a CUDA capture;
- :mod:`.registry`: where a graph's model comes from and the registry shared by the graphs
  of a watch;
- :mod:`.cuda_capture`: the captures between ``capture_begin`` and ``capture_end``, and
  which backend reads each graph's nodes (the CUDA graph itself through ``graphcheck._cuda``,
  or the ATen dispatcher's ops);
- :mod:`.cuda_hooks`: the hooks on CUDA graph capture, the caching allocator's history, and
  what runs at CUDA's initialization;
- :mod:`.output`: a check point's result, merged report, files and error;
- :mod:`.index_page`: the folder's ``index.html`` and the navigation block of each page
  (standard library only);
- :mod:`.profiling`: the windows whose captures are an engine's memory profiling (not
  watched);
- :mod:`.import_hook`: what the ``graphcheck_watch.pth`` line calls (waits for ``import
  torch``, then starts the watch through :mod:`.process`);
- :mod:`.settings`: the settings from the environment or an engine's configuration (no torch).

Nothing is imported here, so that the ``.pth`` line imports only :mod:`.import_hook` and
:mod:`.settings` in a process that never imports torch.
"""
