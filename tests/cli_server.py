"""A process that has imported rectiflow's command line and everything a run needs, and forks a child for each command
a test runs: the child is a process of its own (its pid, signals, exit code, stdout and stderr, working directory and
environment), started without the seconds of imports a fresh interpreter spends (`conftest.run_cli`).

One JSON request per line on stdin: {"args": [...], "cwd": ..., "env": {...}, "out": path, "err": path}. The answers
are two lines on stdout: {"pid": ...} when the child has started, {"code": ...} when it has ended."""
import atexit, io, json, os, signal, sys, traceback

def run_command(req: dict):
    "The child: the command's environment, working directory and output files, then `rectiflow ARGS`; never returns."
    code = 1
    try:
        os.environ.clear()
        os.environ.update(req['env'])
        os.chdir(req['cwd'])
        for sig in (signal.SIGTERM, signal.SIGPIPE): signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)      # Ctrl-C: a KeyboardInterrupt, as in `python`
        devnull = os.open(os.devnull, os.O_RDONLY)
        out = os.open(req['out'], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        err = os.open(req['err'], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        for fd, to in ((devnull, 0), (out, 1), (err, 2)): os.dup2(fd, to)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, 'r', closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, 'w', closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, 'w', closefd=False), write_through=True)
        sys.argv = ['rectiflow', *req['args']]
        sys.path[0] = req['cwd']                # as `python -m` puts the working directory first, not this folder
        from rectiflow.cli import main
        try: code = main(req['args']) or 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if isinstance(e.code, str): print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try: atexit._run_exitfuncs()
        finally:
            for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
                try: f.flush()
                except Exception: pass
            os._exit(code)

def serve():
    import rectiflow.cli, rectiflow.tasks.registry, rectiflow.tasks.flow, rectiflow.run.trainer     # noqa: F401
    import rectiflow.tools.gates, rectiflow.tools.lr_find, rectiflow.tools.sweep                     # noqa: F401
    answer = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        answer.flush()
        pid = os.fork()
        if pid == 0: run_command(req)
        answer.write(json.dumps({'pid': pid}) + '\n')
        answer.flush()
        _, status = os.waitpid(pid, 0)
        answer.write(json.dumps({'code': os.waitstatus_to_exitcode(status)}) + '\n')
        answer.flush()

if __name__ == '__main__': serve()
