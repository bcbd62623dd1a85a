"""rpr_nmt.train.signals.StopSignals: SIGINT and SIGTERM ask a run to stop after its update; a
second signal of the same kind gives the default back; the sweep's stop file is a shared request."""

from __future__ import annotations

import signal

import pytest

from rpr_nmt.train.signals import StopSignals


def test_sigterm_sets_the_stop_flag_and_the_old_handler_returns():
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals() as stop:
        assert not stop.requested
        signal.raise_signal(signal.SIGTERM)  # handled synchronously in the main thread
        assert stop.requested
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_after_ctrl_c_is_one_more_request_to_stop(caplog):
    """SIGTERM after SIGINT (a time limit, docker stop, SLURM preemption) is one more request to
    stop, not a kill: the update finishes and the checkpoint is written. raise_signal runs the
    handler before it returns (os.kill to this process may be handled a little later); the
    handlers before StopSignals stand in for the defaults, which would end the test process."""
    given_back: list[int] = []
    before = {sig: signal.signal(sig, lambda signum, frame: given_back.append(signum))
              for sig in (signal.SIGINT, signal.SIGTERM)}  # fmt: skip
    try:
        for first, second in [(signal.SIGINT, signal.SIGTERM), (signal.SIGTERM, signal.SIGINT)]:
            with StopSignals() as stop:
                signal.raise_signal(first)
                signal.raise_signal(second)
                assert stop.requested and given_back == []
                assert signal.getsignal(second) == stop._handle
                assert f"{second.name} received: already stopping" in caplog.text
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_of_the_same_kind_gives_the_default_back(sig):
    calls: list[int] = []
    before = signal.signal(sig, lambda signum, frame: calls.append(signum))
    try:
        with StopSignals() as stop:
            signal.raise_signal(sig)
            assert stop.requested and calls == []
            signal.raise_signal(sig)
            assert calls == [sig]  # the handler before StopSignals ran: the default came back
    finally:
        signal.signal(sig, before)


def test_a_stop_file_is_a_shared_stop_request(tmp_path):
    # The sweep's stop file (rpr_nmt.cli.sweep_stop): its existence asks to stop, and a signal
    # received by one run creates it for the others.
    shared = tmp_path / ".stop"
    with StopSignals(shared) as stop:
        assert not stop.requested
        shared.touch()  # another run, or the launching process, was signalled
        assert stop.requested and not stop.signalled
    shared.unlink()
    with StopSignals(shared) as stop:
        signal.raise_signal(signal.SIGTERM)
        assert stop.signalled and shared.exists()
