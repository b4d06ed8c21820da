"""app: the edges a person or a program touches. May import every layer below.

The command line (cli: the parser and the dispatch, the only module that exits), one module per command
(measure_command, merge_command, profiles_command, fit_command), each turning its options into a frozen
request and returning the text for stdout with the exit code; every output format (render/); worker
supervision (runner; head_start, the workers started before the tool loads; in_process, a device measured
in this process; the worker's entry point worker_process, its body worker, their messages; the
leftover_writer; subprocesses, how a fresh Python of this package is started; timeline, where a run's time
goes); the one writer of files (output); the progress line
(progress); the pytest plugin (plugin).
"""
