"""Runs an oracle script in a process forked from one that has torch and timm
imported already.

Importing torch and timm costs 3 to 16 s of CPU on the test machine, more
than most oracle scripts themselves; the suite runs a few hundred of them,
each test case in its own process. So the first call starts a server (one
per Python, environment and version of this file) that imports them once and
then forks a child per script; later calls cost a fork.

    python forkserver.py SCRIPT [ARG...]      run SCRIPT as `python SCRIPT ARG...` would
    python forkserver.py --serve SOCKET       the server (started by the above)

The client passes its stdout and stderr (as file descriptors), its working
folder and its environment; the child runs the script with them under
runpy as __main__ and the client exits with the script's exit status. When
the client dies (a test's timeout kills it), the child is killed too. The
server exits after IDLE_SECONDS without a request. TIMM_ORACLE_FORKSERVER=0,
or any failure to reach the server, runs the script in a fresh interpreter
instead, exactly as before.
"""

import contextlib
import hashlib
import json
import os
import socket
import struct
import sys
import time

IDLE_SECONDS = 90
START_TIMEOUT_SECONDS = 300
# The environment the imports in the server depend on: a server is shared
# only by clients that agree on these.
SERVER_ENV_KEYS = ("PYTHONHASHSEED", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES")


def socket_path():
    key = hashlib.sha256()
    key.update(sys.executable.encode())
    with open(__file__, "rb") as f:
        key.update(f.read())
    for name in SERVER_ENV_KEYS:
        key.update(f"{name}={os.environ.get(name)}\0".encode())
    return f"/tmp/timm-oracle-{os.getuid()}-{key.hexdigest()[:16]}.sock"


def send_request(conn, request, fds):
    """`request` as JSON behind its length, with the file descriptors `fds`."""
    data = json.dumps(request).encode()
    socket.send_fds(conn, [struct.pack("!I", len(data)) + data], list(fds))


def receive_exact(conn, count, head=b""):
    data = head
    while len(data) < count:
        chunk = conn.recv(count - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return data


# ---- client ------------------------------------------------------------------


def connect(path):
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        return conn
    except OSError:
        conn.close()
        return None


def start_server(path):
    """Starts the server detached from this process (its own session, no
    inherited output, so ctest does not wait for it) and waits until it
    accepts; None if it did not come up."""
    import fcntl
    import subprocess

    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = connect(path)  # another client may have started it meanwhile
        if conn is not None:
            return conn
        server = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve", path],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline and server.poll() is None:
            conn = connect(path)
            if conn is not None:
                return conn
            time.sleep(0.05)
        return None


def run_directly(argv):
    os.execv(sys.executable, [sys.executable] + argv)


def client(argv):
    if os.environ.get("TIMM_ORACLE_FORKSERVER", "1") == "0":
        run_directly(argv)
    path = socket_path()
    try:
        conn = connect(path) or start_server(path)
        if conn is None:
            run_directly(argv)
        sys.stdout.flush()
        sys.stderr.flush()
        request = {"argv": [os.path.abspath(argv[0])] + argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}
        send_request(conn, request, fds=(1, 2))
        (status,) = struct.unpack("!i", receive_exact(conn, 4))
    except (OSError, ConnectionError):
        # The server went away before it reported an exit status (almost
        # always before the script started: a server leaving when idle):
        # run the script here.
        run_directly(argv)
    sys.exit(status)


# ---- server ------------------------------------------------------------------


def run_script(request, out_fd, err_fd):
    """In the forked child: becomes `python SCRIPT ARG...` and never returns."""
    import runpy
    import traceback

    os.setpgid(0, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.close(out_fd)
    os.close(err_fd)
    # A fresh interpreter seeds these from the OS; the children of one server
    # would otherwise share the server's state.
    import random

    import numpy

    random.seed()
    numpy.random.seed()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv = request["argv"]
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(argv[0])
    status = 0
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            status = 0
        elif isinstance(e.code, int):
            status = e.code
        else:
            print(e.code, file=sys.stderr)
            status = 1
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status & 0xFF)


def exit_status(wait_status):
    if os.WIFEXITED(wait_status):
        return os.WEXITSTATUS(wait_status)
    return 128 + os.WTERMSIG(wait_status)


def handle(conn):
    """In a child of the server, one per request: forks the script, relays
    its exit status, kills it if the client goes away."""
    import select

    frame, fds, _, _ = socket.recv_fds(conn, 1 << 16, 2)
    if len(fds) != 2 or len(frame) < 4:
        return
    (length,) = struct.unpack("!I", frame[:4])
    request = json.loads(receive_exact(conn, 4 + length, frame)[4:])
    pid = os.fork()
    if pid == 0:
        conn.close()
        run_script(request, fds[0], fds[1])
    for fd in fds:
        os.close(fd)
    while True:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            conn.sendall(struct.pack("!i", exit_status(wait_status)))
            return
        readable, _, _ = select.select([conn], [], [], 0.05)
        if readable and not conn.recv(1):
            os.killpg(pid, 9)
            os.waitpid(pid, 0)
            return


def serve(path):
    import select

    # What the oracle scripts import, so that their children start warm.
    import numpy  # noqa: F401
    import PIL.Image  # noqa: F401
    import safetensors.torch  # noqa: F401
    import timm  # noqa: F401
    import timm.data  # noqa: F401
    import timm.optim  # noqa: F401
    import timm.scheduler  # noqa: F401
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(path):
        os.unlink(path)  # a server that died without cleaning up
    listener.bind(path)
    listener.listen(64)
    children = set()
    last_active = time.monotonic()
    try:
        while True:
            readable, _, _ = select.select([listener], [], [], 1.0)
            for pid in list(children):
                if os.waitpid(pid, os.WNOHANG)[0]:
                    children.discard(pid)
            if children:
                last_active = time.monotonic()
            if not readable:
                if time.monotonic() - last_active > IDLE_SECONDS:
                    return
                continue
            conn, _ = listener.accept()
            pid = os.fork()
            if pid == 0:
                listener.close()
                try:
                    handle(conn)
                finally:
                    os._exit(0)
            conn.close()
            children.add(pid)
    finally:
        # Unlink first: a server started after this one stopped accepting
        # binds the same path, which must not be removed from under it.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        listener.close()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
    elif len(sys.argv) >= 2:
        client(sys.argv[1:])
    else:
        sys.exit("usage: forkserver.py SCRIPT [ARG...] | --serve SOCKET")
