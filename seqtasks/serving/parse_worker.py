"""The worker process of `seqtasks.serving.parsing`: reads request frames on stdin, answers on stdout."""

import sys

from seqtasks.serving.parsing import serve_frames

if __name__ == "__main__":
    serve_frames(sys.stdin.buffer, sys.stdout.buffer)
