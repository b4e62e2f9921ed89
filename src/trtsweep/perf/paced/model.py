"""Triton python model `paced` (see trtsweep.perf.paced): chunks at known times."""

import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: float(v["string_value"]) for k, v in config["parameters"].items()}
        self.first = params["first_ms"] / 1000.0
        self.gap = params["gap_ms"] / 1000.0
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)

    def _sleep_until(self, deadline):
        delay = deadline - time.perf_counter()
        if delay > 0:
            time.sleep(delay)

    @staticmethod
    def _response(texts):
        data = np.array(["".join(texts).encode()], dtype=object)
        return pb_utils.InferenceResponse([pb_utils.Tensor("text_output", data)])

    def _stream(self, request, start):
        sender = request.get_response_sender()
        n = int(pb_utils.get_input_tensor_by_name(request, "max_tokens").as_numpy().reshape(-1)[0])
        flag = pb_utils.get_input_tensor_by_name(request, "stream")
        stream = True if flag is None else bool(flag.as_numpy().reshape(-1)[0])
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        texts = [f"t{i} " for i in range(n)]
        if not stream:
            self._sleep_until(start + self.first + self.gap * max(n - 1, 0))
            sender.send(self._response(texts), flags=final)
            return
        for i, text in enumerate(texts):
            self._sleep_until(start + self.first + self.gap * i)
            if sender.is_cancelled():  # the client gave up (gRPC cancel): stop, as an LLM backend does
                pb_utils.Logger.log_info(f"paced: request cancelled by the client after {i} of {n} chunks")
                return
            sender.send(self._response([text]), flags=final if i == n - 1 else 0)
        if n == 0:
            sender.send(flags=final)

    def execute(self, requests):
        start = time.perf_counter()
        if self.decoupled:
            for request in requests:
                threading.Thread(target=self._stream, args=(request, start), daemon=True).start()
            return None
        responses = []
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "max_tokens").as_numpy().reshape(-1)[0])
            self._sleep_until(start + self.first + self.gap * max(n - 1, 0))
            responses.append(self._response([f"t{i} " for i in range(n)]))
        return responses
