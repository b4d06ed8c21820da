"""Running measurements: worker processes and their supervision, the head start, the messages between
them, the leftover writer, progress; opening devices happens here, and for trace, the user's command.

May import core, devices, experiments and analysis; never the cli, outputs or render wings.
"""
