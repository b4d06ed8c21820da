"""Everything the tool writes: the one file writer (checked before measuring, atomic by file type), the
delivery of a run's files before stdout, the fleet files, the published JSON Schemas and the one stderr
funnel.

May import core, analysis and the render wing; never the cli or run wings.
"""
