"""A machine on which switching sides costs the first call after the switch: the design flaw the H200 showed."""


class SwitchingMachine:
    """Two sides whose call, the first after the other side ran, costs ``penalty_ms`` more: the switch
    cost the H200 showed (the first call of each block 15-40 % slower). Its timer reads each call's cost."""

    def __init__(self, steady_ms, penalty_ms):
        self.steady_ms, self.penalty_ms = steady_ms, penalty_ms
        self.last_side, self.cost = None, 0.0
        self.name = "simulated"

    def side(self, name):
        def call():
            switched = self.last_side not in (None, name)
            self.cost = self.steady_ms[name] + (self.penalty_ms[name] if switched else 0.0)
            self.last_side = name
        return call

    def time_calls(self, fn, runs):
        out = []
        for _ in range(runs):
            fn()
            out.append(self.cost)
        return out
