"""`seqtasks serve`: TensorFlow Serving's REST API and a page to try a model, on Starlette and uvicorn.

- `server` checks the port, loads the models and runs the application on
  uvicorn until SIGINT or SIGTERM;
- `models` finds and loads what is served (through `seqtasks.load`), by
  name and version;
- `app` routes the requests: the REST API, `/healthz`, and the page, whose
  files are `static/` (`index.html`, `app.js`, `style.css`);
- `limits` holds the bounds: `Limits` of one request, `Capacity` of the
  server's work (queue, deadlines, requests in flight, slow clients);
- `parsing` parses request bodies off the event loop, a large one in the
  worker process `parse_worker`; `requests` reads TensorFlow Serving's JSON
  into input columns and writes the outputs back;
- `batching` merges concurrent requests to a model into model calls, from a
  bounded queue, on the model's own thread;
- `health` answers `/healthz`: whether each model is working.

Needs the optional extra `seqtasks[serve]`.
"""
