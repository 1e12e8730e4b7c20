r"""What a GPU run queue's call leaves in ``$OUT`` (:class:`Outputs`):
``runs.tar`` and ``summary.json``, each rewritten whole and atomically
after every finished run, and ``log.txt``."""

import io
import json
import os
import tarfile
import time

from gate_paper import store

#: The files of ``$OUT``.
FILES = ('runs.tar', 'summary.json', 'log.txt')


def _replace(path, data: bytes):
    tmp = f'{path}.tmp'
    with open(tmp, 'wb') as f:
        f.write(data)
    os.replace(tmp, path)


class Outputs:
    r"""``$OUT``: ``runs.tar``, ``summary.json`` (each rewritten whole
    after every finished run) and ``log.txt``."""

    def __init__(self, out, work, summary):
        os.makedirs(out, exist_ok=True)
        self.out, self.work, self.summary = out, work, summary
        self.finished = []  # (study, file name)
        self.log_file = open(os.path.join(out, 'log.txt'), 'a')

    def log(self, text):
        line = f'[{time.strftime("%H:%M:%S")}] {text}'
        print(line, flush=True)
        self.log_file.write(line + '\n')
        self.log_file.flush()

    def add(self, study, record):
        self.finished.append((study, store.run_id(record['config']) + '.json'))
        self.write()

    def write(self):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode='w') as tar:
            for study, name in self.finished:
                tar.add(
                    os.path.join(self.work, study, name), f'{study}/{name}'
                )
        _replace(os.path.join(self.out, 'runs.tar'), buffer.getvalue())
        text = json.dumps(self.summary(), indent=1, allow_nan=False)
        _replace(os.path.join(self.out, 'summary.json'), text.encode())
