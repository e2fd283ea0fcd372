"""`seqtasks serve`: TensorFlow Serving's REST API and a page to try a model, on Starlette and uvicorn.

`models` finds and loads what is served (through `seqtasks.load`), `limits`
holds the request bounds, `requests` reads TensorFlow Serving's JSON,
`batching` merges concurrent requests, `app` routes them and `server` runs
uvicorn. Needs the optional extra `seqtasks[serve]`.
"""
