"""The CUPTI callback collector of ``trace``: its C source (collector.c, cupti_abi.h), how it is built and
cached (build.py), and where libcupti is found (libcupti.py)."""
