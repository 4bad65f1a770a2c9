"""The simulator's servers: a continuous-batching decode instance (and a relay decoding on a prefill
instance's steps) and a processor-sharing WAN link.

Both use a virtual clock so that a step-by-step (or byte-by-byte) process costs O(log n) per event:

decode instance  every step advances each of its B sequences by one token and takes tau(B) seconds,
                 so its token clock V grows at 1 / tau(B); a sequence joining at V0 that needs m
                 tokens finishes when V = V0 + m. A stall (an extend step for a handoff) freezes V;
                 stalls queue behind each other.
link             n flows share capacity C(t), each at rate min(F, C(t) / n) (TCP cap F per flow);
                 the per-flow byte clock S grows at that rate; a flow of x bytes joining at S0
                 finishes when S = S0 + x.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from pddplan.net.fluctuation import CapacityPath, SteppedPath

# The methods below run several times per event (millions of times a simulation): they compare two
# floats with conditional expressions, written in max()'s and min()'s own order (max(a, b) is
# `b if b > a else a`), which cost a third of the builtin calls and give the same floats.


@dataclass(slots=True)
class DecodeInstance:
    """One decode instance (main decoder, relay or plain decoder) in the simulation."""

    index: int
    step_table: list[float]
    max_batch: int
    batch: int = 0
    clock: float = 0.0
    last_t: float = 0.0
    stall_until: float = 0.0
    heap: list[tuple[float, int]] = field(default_factory=list)
    joined_at: dict[int, float] = field(default_factory=dict)
    queue: deque[tuple[int, float, float]] = field(default_factory=deque)
    version: int = 0
    batch_time_integral: float = 0.0
    stalled_s: float = 0.0  # extend steps run so far (seconds)

    def step_s(self, batch: int | None = None) -> float:
        """Step time at `batch` sequences (default: the current batch): the table's entry, its
        first (batch 1) below it, its last beyond it."""
        b = self.batch if batch is None else batch
        table = self.step_table
        if 0 < b < len(table):
            return table[b]
        return table[1] if b < 1 else table[-1]

    def advance(self, t: float) -> None:
        """Move the token clock to time `t` (frozen while stalled)."""
        if t <= self.last_t:
            return
        batch = self.batch
        self.batch_time_integral += batch * (t - self.last_t)
        if batch > 0:
            start = self.stall_until if self.stall_until > self.last_t else self.last_t
            running = t - start
            if running > 0:
                table = self.step_table  # step_s() inline
                self.clock += running / (table[batch] if batch < len(table) else table[-1])
        self.last_t = t

    def tokens_to_next_finish(self) -> float | None:
        """Tokens the next sequence to finish still needs (None when idle); finished or handed-off
        sequences' heap entries are dropped on the way."""
        while self.heap and self.heap[0][1] not in self.joined_at:
            heapq.heappop(self.heap)
        if not self.heap:
            return None
        need = self.heap[0][0] - self.clock
        return 0.0 if need < 0.0 else need

    def next_finish(self) -> float:
        """Time the next sequence finishes, if nothing changes (inf when idle)."""
        need = self.tokens_to_next_finish()
        if need is None:
            return math.inf
        start = self.stall_until if self.stall_until > self.last_t else self.last_t
        b, table = self.batch, self.step_table  # step_s() inline
        return start + need * (table[b] if 0 < b < len(table) else (table[1] if b < 1 else table[-1]))

    def admit(self, request: int, tokens: float, t: float, stall_s: float) -> float:
        """Start decoding `tokens` tokens of `request` at `t` after a stall; return its first-token time."""
        if stall_s > 0:
            self.stall(t, stall_s)
        self.advance(t)
        self.batch += 1
        self.joined_at[request] = self.clock
        heapq.heappush(self.heap, (self.clock + (1.0 if tokens < 1.0 else tokens), request))
        b, table = self.batch, self.step_table  # step_s() inline (b >= 1)
        return (t if t > self.stall_until else self.stall_until) + (table[b] if b < len(table) else table[-1])

    def stall(self, t: float, seconds: float) -> None:
        """Run an extend step of `seconds` from `t` (or after the stalls already queued): every
        sequence here waits. The caller reschedules the instance's next completion."""
        self.advance(t)
        self.stall_until = max(self.stall_until, t) + seconds
        self.stalled_s += seconds

    def tokens_done(self, request: int) -> float:
        """Tokens `request` has produced here so far (call after `advance`)."""
        return self.clock - self.joined_at[request]

    def remove(self, request: int) -> None:
        """Take `request` out (finished or handed off); its heap entry is dropped lazily."""
        del self.joined_at[request]
        self.batch -= 1


class ColocatedRelay(DecodeInstance):
    """A relay decoding on a prefill instance whose steps are known (`PrefillRun.steps`).

    While a prefill step [s_j, e_j) runs, every relay sequence rides in it and gains one token per
    step (fluidly, 1 / (e_j - s_j) per second); while the instance has no prefill, the relay runs
    its own decode steps of tau(B). The token clock is V(t) = F(t) + idle(t) / tau(B): F the prefill
    steps done by t (fractional inside one), idle(t) the time by t outside them. V is piecewise
    linear with breaks at the step bounds, so advancing and inverting it are binary searches.
    """

    def __init__(
        self, index: int, step_table: list[float], max_batch: int, starts: list[float], ends: list[float]
    ) -> None:
        super().__init__(index=index, step_table=step_table, max_batch=max_batch)
        self.starts = starts
        self.ends = ends
        self.busy_before = [0.0]  # busy time before step j
        for start, end in zip(starts, ends, strict=True):
            self.busy_before.append(self.busy_before[-1] + end - start)
        # idle(t) at the end of step j, the time outside the steps by then
        self.idle_at_end = [end - busy for end, busy in zip(ends, self.busy_before[1:], strict=True)]
        # the last (t, F(t), idle(t)): an admission or an advance asks the same t two or three times
        self._last_position = (math.nan, 0.0, 0.0)

    def _position(self, t: float) -> tuple[float, float]:
        """(F(t), idle(t)): prefill steps done by t, and the time by t outside them."""
        known_t, done, idle = self._last_position
        if t == known_t:
            return done, idle
        done, idle = self._position_at(t)
        self._last_position = (t, done, idle)
        return done, idle

    def _position_at(self, t: float) -> tuple[float, float]:
        j = bisect.bisect_right(self.ends, t)
        done, busy = float(j), self.busy_before[j]
        if j < len(self.starts) and self.starts[j] < t:
            length = self.ends[j] - self.starts[j]
            done += (t - self.starts[j]) / length
            busy += t - self.starts[j]
        return done, t - busy

    def _clock_at(self, t: float, tau: float) -> float:
        done, idle = self._position(t)
        return done + idle / tau

    def _time_at(self, clock: float, tau: float) -> float:
        """The t at which V(t) = `clock` (V relative to time 0, at decode step `tau`)."""
        ends, starts, busy_before, idle_at_end = self.ends, self.starts, self.busy_before, self.idle_at_end
        low, high = 0, len(ends)
        while low < high:
            mid = (low + high) // 2
            if idle_at_end[mid] >= (clock - mid - 1) * tau:
                high = mid
            else:
                low = mid + 1
        j = low
        if j == len(ends):  # after the last step: idle from then on
            end = ends[-1] if ends else 0.0
            at_end = len(ends) + (end - busy_before[-1]) / tau
            return end + (clock - at_end) * tau
        at_start = j + (starts[j] - busy_before[j]) / tau
        if clock <= at_start:  # in the idle gap before step j
            return starts[j] - (at_start - clock) * tau
        return starts[j] + (clock - at_start) * (ends[j] - starts[j])

    def step_s(self, batch: int | None = None) -> float:
        """Time per token now: the running prefill step's length, else tau(B)."""
        j = bisect.bisect_right(self.ends, self.last_t)
        if batch is None and j < len(self.starts) and self.starts[j] <= self.last_t:
            return self.ends[j] - self.starts[j]
        return super().step_s(batch)

    def advance(self, t: float) -> None:
        if t <= self.last_t:
            return
        self.batch_time_integral += self.batch * (t - self.last_t)
        if self.batch > 0:
            tau = DecodeInstance.step_s(self)
            before = self._clock_at(self.last_t, tau)  # first: `_position` keeps the last t asked, t
            self.clock += self._clock_at(t, tau) - before
        self.last_t = t

    def next_finish(self) -> float:
        need = self.tokens_to_next_finish()
        if need is None:
            return math.inf
        tau = DecodeInstance.step_s(self)
        return max(self._time_at(self._clock_at(self.last_t, tau) + need, tau), self.last_t)

    def admit(self, request: int, tokens: float, t: float, stall_s: float) -> float:
        """Start decoding `request` at `t` (no stall: the KV is already here); its first token
        comes when V has grown by one."""
        self.advance(t)
        self.batch += 1
        self.joined_at[request] = self.clock
        heapq.heappush(self.heap, (self.clock + max(tokens, 1.0), request))
        tau = DecodeInstance.step_s(self)
        return max(self._time_at(self._clock_at(t, tau) + 1.0, tau), t)


class Link:
    """A WAN link with processor sharing, a per-flow cap and a fluctuating capacity."""

    def __init__(
        self, capacity_bytes_per_s: float, flow_cap_bytes_per_s: float, path: CapacityPath | SteppedPath
    ) -> None:
        self.capacity = capacity_bytes_per_s
        self.flow_cap = flow_cap_bytes_per_s
        self.path = path
        # a constant path (no fluctuation, or a one-row trace) holds its fraction for good
        self.fraction = path.next_step(0.0)[0] if path.constant else 1.0
        self.next_change = math.inf
        self.clock = 0.0
        self.last_t = 0.0
        self.flows: dict[int, float] = {}
        self.heap: list[tuple[float, int]] = []
        self.bytes_delivered = 0.0
        self.capacity_integral = 0.0
        self._path_t = 0.0
        self.timeline: list[tuple[float, int]] | None = None  # (t, flows) at each change, when recorded

    def advance(self, t: float) -> None:
        """Move the byte clock to `t`, crossing capacity changes on the way."""
        last = self.last_t
        flows = len(self.flows)  # no flow starts or stops on the way
        while t > last:
            change = self.next_change
            segment_end = change if change < t else t
            dt = segment_end - last
            if flows == 0:  # bytes/s per flow: min(F, C f / n)
                per_flow = 0.0
            else:
                share = self.capacity * self.fraction / flows
                per_flow = share if share < self.flow_cap else self.flow_cap
            self.clock += dt * per_flow
            self.bytes_delivered += dt * per_flow * flows
            self.capacity_integral += dt * self.capacity * self.fraction
            last = self.last_t = segment_end
            if segment_end >= change:
                self._step_capacity(segment_end)

    def _step_capacity(self, t: float) -> None:
        if self.flows or self.next_change == math.inf:
            self.fraction, self.next_change = self.path.next_step(t)
        else:
            self.next_change = math.inf

    def start(self, request: int, size_bytes: float, t: float) -> None:
        """Begin a transfer of `size_bytes` at `t`."""
        self.advance(t)
        if not self.flows and not self.path.constant:
            self.fraction, self.next_change = self.path.next_step(t)
        self.flows[request] = self.clock
        heapq.heappush(self.heap, (self.clock + size_bytes, request))
        if self.timeline is not None:
            self.timeline.append((t, len(self.flows)))

    def sent(self, request: int) -> float:
        """Bytes of `request`'s transfer sent so far."""
        return self.clock - self.flows[request]

    def stop(self, request: int) -> None:
        """End a transfer (done or cancelled; the link was advanced to the time it ends)."""
        del self.flows[request]
        if self.timeline is not None:
            self.timeline.append((self.last_t, len(self.flows)))

    def next_event(self) -> float:
        """Time of the next flow completion or capacity change."""
        heap, flows = self.heap, self.flows
        while heap and heap[0][1] not in flows:
            heapq.heappop(heap)
        if not heap:
            return math.inf
        share = self.capacity * self.fraction / len(flows)  # per flow: min(F, C f / n); n >= 1
        per_flow = share if share < self.flow_cap else self.flow_cap
        last = self.last_t
        finish = last + (heap[0][0] - self.clock) / per_flow if per_flow > 0 else math.inf
        due = self.next_change if self.next_change < finish else finish
        # at least one ulp ahead: a gap below the clock's resolution would leave it where it is and
        # the event loop would call again forever
        return due if due > last else math.nextafter(last, math.inf)

    def pop_finished(self, t: float, on_done: Callable[[int, float], None]) -> None:
        """Complete every flow whose bytes are all sent by `t`."""
        self.advance(t)
        while self.heap:
            size_clock, request = self.heap[0]
            if request not in self.flows:
                heapq.heappop(self.heap)
                continue
            if size_clock - self.clock > 1e-9 * (1.0 if size_clock < 1.0 else size_clock):  # ~1e-9 s per s sent
                break
            heapq.heappop(self.heap)
            self.stop(request)
            on_done(request, t)
