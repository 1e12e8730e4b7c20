r"""``python test/parse_only.py {script PATH | module NAME} ARGS...`` runs
the script (or module) as ``__main__`` with :obj:`ARGS` up to its argument
parser: it exits 0 once :meth:`argparse.ArgumentParser.parse_args` has
parsed them, and as argparse does (2, its error on stderr) where they do
not parse, with nothing of the script's work done after the parse."""

import argparse
import os
import runpy
import sys


def _parse_and_stop(parse_args):
    def parse_args_then_exit(self, *args, **kwargs):
        parse_args(self, *args, **kwargs)
        sys.exit(0)

    parse_args_then_exit.stops = True
    return parse_args_then_exit


def main():
    if not getattr(argparse.ArgumentParser.parse_args, 'stops', False):
        argparse.ArgumentParser.parse_args = _parse_and_stop(
            argparse.ArgumentParser.parse_args
        )
    kind, target, *argv = sys.argv[1:]
    sys.argv = [target, *argv]
    if kind == 'module':
        runpy.run_module(target, run_name='__main__', alter_sys=True)
    else:
        sys.path[0] = os.path.dirname(os.path.abspath(target))
        runpy.run_path(target, run_name='__main__')


if __name__ == '__main__':  # (not when pytest collects its doctests)
    main()
