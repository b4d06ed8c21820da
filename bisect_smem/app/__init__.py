"""app: the edges a person or a program touches, in four wings, and the pytest plugin. May import every
layer below (core, devices, experiments, analysis).

- cli/: the parser, the lazy registry of subcommands, one module per subcommand; the only wing that exits.
- run/: worker processes and their supervision; where devices are opened and the user's command is run.
- outputs/: the one writer of files, delivery before stdout, the fleet files, the JSON Schemas, stderr.
- render/: every output format over the same structured rows; imports no devices.

A wing imports only the wings after it in this list (cli > run, outputs > render); run imports neither
outputs nor render. plugin.py, the pytest plugin, imports run.
"""
