"""app: the edges a person or a program touches. May import every layer below.

The command line (cli: the only module that prints or exits), the subcommands (fit_command), worker
supervision (runner), text and JSON output (report, output), the staircase plot (plot) and the pytest
plugin (plugin).
"""
