"""The command line: the parser, the lazy registry of subcommands and one module per subcommand, each
``parse``-ing its options into a frozen request and returning (text, exit code). The only wing that exits.

May import every layer below app, and the run, outputs and render wings.
"""
