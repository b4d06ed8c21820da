"""The schema of ``bisect-smem trace --json``'s summary (``bisect_smem/trace/v2``), written here rather than
generated: the summary is built from analysis/trace.py's Explained by app/render/trace.py, field by field.
outputs/schemas.py publishes it with the others (``bisect-smem schema trace``), its union types written as
``anyOf`` as for every schema. Within a version fields are only ever added; v2 made identical requests one
entry with a count (v1 had one entry per record), added graph kinds and refusal causes."""

from __future__ import annotations

from typing import Any

from bisect_smem.analysis.trace import Cause
from bisect_smem.app.render.trace import TRACE_SCHEMA as TRACE_ID
from bisect_smem.core.trace_events import LaunchKind, Skip

REQUEST_KINDS = ["attribute", *(kind.value for kind in LaunchKind)]
CAUSES = [cause.value for cause in Cause]
SKIP_KINDS = [kind.name.lower() for kind in Skip]

TRACE_SCHEMA: dict[str, Any] = {'$schema': 'https://json-schema.org/draft/2020-12/schema',
 '$id': 'urn:bisect-smem:trace:v2',
 'title': 'bisect-smem trace summary',
 'description': "Every shared-memory request a traced command's CUDA processes made, explained against the limits "
                'of the GPU it ran on and of the other targets asked for; identical requests are one entry with a '
                'count. Fields are only ever added.',
 'type': 'object',
 'required': ['schema',
              'processes',
              'untraced',
              'cupti_libraries',
              'kernels',
              'limits',
              'targets',
              'torn_lines',
              'past_table',
              'unwritable',
              'skipped',
              'requests',
              'settings'],
 'properties': {'schema': {'const': TRACE_ID},
                'processes': {'type': 'integer',
                              'minimum': 0,
                              'description': 'processes the collector was loaded into'},
                'untraced': {'type': 'array',
                             'items': {'type': 'object',
                                       'required': ['pid', 'reason'],
                                       'properties': {'pid': {'type': 'integer'}, 'reason': {'type': 'string'}}}},
                'cupti_libraries': {'type': 'array',
                                    'items': {'type': 'string'},
                                    'description': 'the libcupti files the processes used'},
                'kernels': {'type': 'integer', 'minimum': 0},
                'limits': {'type': ['string', 'null'],
                           'description': 'the GPU the command ran on, whose limits explain each request; null '
                                          'where none was known'},
                'targets': {'type': 'array', 'items': {'type': 'string'}},
                'torn_lines': {'type': 'integer',
                               'minimum': 0,
                               'description': 'lines cut short by a process killed while writing'},
                'past_table': {'type': 'array',
                               'description': "launches the collector counted past its table of configurations: "
                                              'their requests were not recorded',
                               'items': {'type': 'object',
                                         'required': ['kernel', 'count', 'processes'],
                                         'properties': {'kernel': {'type': ['string', 'null'],
                                                                   'description': 'null: launches past both of the '
                                                                                  "collector's tables"},
                                                        'count': {'type': 'integer', 'minimum': 1},
                                                        'processes': {'type': 'integer', 'minimum': 1}}}},
                'unwritable': {'type': 'array',
                               'description': 'processes whose collector could not write its trace',
                               'items': {'type': 'object',
                                         'required': ['pid', 'errno', 'reason', 'path', 'command'],
                                         'properties': {'pid': {'type': 'integer'},
                                                        'errno': {'type': 'integer'},
                                                        'reason': {'type': 'string'},
                                                        'path': {'type': 'string'},
                                                        'command': {'type': 'string'}}}},
                'skipped': {'type': 'array',
                            'description': 'lines and files of the trace that could not be read, by kind',
                            'items': {'type': 'object',
                                      'required': ['kind', 'description', 'count', 'first'],
                                      'properties': {'kind': {'enum': SKIP_KINDS},
                                                     'description': {'type': 'string'},
                                                     'count': {'type': 'integer', 'minimum': 1},
                                                     'first': {'type': 'string',
                                                               'description': 'the file (and line) of the first'}}}},
                'requests': {'type': 'array', 'items': {'$ref': '#/$defs/request'}},
                'settings': {'type': 'array', 'items': {'$ref': '#/$defs/setting'}}},
 '$defs': {'limit': {'type': 'object',
                     'required': ['target', 'kind', 'optin_limit_bytes', 'accepts_bytes', 'over_bytes', 'fits'],
                     'properties': {'target': {'type': 'string'},
                                    'kind': {'enum': ['measured', 'published']},
                                    'optin_limit_bytes': {'type': ['integer', 'null']},
                                    'accepts_bytes': {'type': ['integer', 'null'],
                                                      'description': "the opt-in limit less the kernel's static "
                                                                     'data, aligned to 16 B'},
                                    'over_bytes': {'type': ['integer', 'null'],
                                                   'description': 'requested - accepts: positive is over, negative '
                                                                  'is bytes to spare'},
                                    'fits': {'type': ['boolean', 'null']}}},
           'request': {'type': 'object',
                       'required': ['pid',
                                    'kind',
                                    'api',
                                    'kernel',
                                    'readable',
                                    'requested_bytes',
                                    'static_bytes',
                                    'result',
                                    'refused',
                                    'count',
                                    'block',
                                    'cluster',
                                    'here',
                                    'elsewhere',
                                    'fit',
                                    'processes',
                                    'cause',
                                    'kernel_limit_bytes',
                                    'max_threads',
                                    'registers',
                                    'graph_nodes'],
                       'properties': {'pid': {'type': 'integer', 'description': 'the lowest of the processes that made it'},
                                      'kind': {'enum': REQUEST_KINDS,
                                               'description': 'graph node: a node as built, counted once; graph '
                                                              'replay: a node of an executable graph, counted per '
                                                              'cuGraphLaunch; refused graph launch: the node of a '
                                                              'refused cuGraphLaunch that asks the most'},
                                      'api': {'type': 'string',
                                              'description': "the call the program made (the runtime's where it "
                                                             'made one)'},
                                      'kernel': {'type': ['string', 'null'],
                                                 'description': 'the name the driver gave, mangled'},
                                      'readable': {'type': ['string', 'null'],
                                                   'description': 'the name demangled, whole'},
                                      'requested_bytes': {'type': 'integer',
                                                          'description': 'MaxDynamicSharedMemorySize asked, or the '
                                                                         "launch's dynamic shared memory"},
                                      'static_bytes': {'type': ['integer', 'null']},
                                      'result': {'type': 'string'},
                                      'refused': {'type': 'boolean'},
                                      'count': {'type': 'integer',
                                                'minimum': 0,
                                                'description': 'identical requests made (a graph replay: its '
                                                               'launches; 0 where it was never launched)'},
                                      'processes': {'type': 'integer', 'minimum': 0},
                                      'cause': {'enum': [*CAUSES, None],
                                                'description': 'why a refused request was refused, as far as the '
                                                               'records tell; null where it was not refused'},
                                      'kernel_limit_bytes': {'type': ['integer', 'null'],
                                                             'description': "the kernel's MaxDynamicSharedMemorySize "
                                                                            'at the refusal'},
                                      'max_threads': {'type': ['integer', 'null'],
                                                      'description': "the kernel's most threads per block at the "
                                                                     'refusal'},
                                      'registers': {'type': ['integer', 'null'],
                                                    'description': 'registers per thread, at the refusal'},
                                      'graph_nodes': {'type': 'integer',
                                                      'minimum': 0,
                                                      'description': 'of a refused graph launch: its kernel nodes'},
                                      'block': {'type': ['array', 'null'],
                                                'items': {'type': 'integer'},
                                                'minItems': 3,
                                                'maxItems': 3},
                                      'cluster': {'type': ['array', 'null'],
                                                  'items': {'type': 'integer'},
                                                  'minItems': 3,
                                                  'maxItems': 3},
                                      'here': {'oneOf': [{'$ref': '#/$defs/limit'}, {'type': 'null'}]},
                                      'elsewhere': {'type': 'array', 'items': {'$ref': '#/$defs/limit'}},
                                      'fit': {'type': ['string', 'null'],
                                              'description': 'what fit says of a CUTLASS kernel its name '
                                                             'describes'}}},
           'setting': {'type': 'object',
                       'required': ['pid', 'api', 'kernel', 'readable', 'attribute', 'value', 'result', 'refused',
                                    'count'],
                       'properties': {'pid': {'type': 'integer'},
                                      'api': {'type': 'string'},
                                      'kernel': {'type': ['string', 'null']},
                                      'readable': {'type': ['string', 'null']},
                                      'attribute': {'type': 'string'},
                                      'value': {'type': 'integer'},
                                      'result': {'type': 'string'},
                                      'refused': {'type': 'boolean'},
                                      'count': {'type': 'integer', 'minimum': 1}}}}}
