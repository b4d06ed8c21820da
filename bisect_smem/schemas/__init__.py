"""Package data: the published JSON Schemas (draft 2020-12) of the report, the baseline and the fit
result, generated from the model by bisect_smem/app/outputs/schemas.py; no code lives here."""
