"""Oracle for timm-cpp's TensorBoard event files (--log-tensorboard), read
with tensorboard's own reader (no TensorFlow: tensorboard's stub reader
checks both CRCs of each record).

  tensorboard_oracle.py scalars DIR
      Loads every event file in DIR with tensorboard's EventAccumulator, as
      `tensorboard --logdir` does, and prints one line
      "SCALARS <json>": {"files": [names], "file_version": the first event's,
      "scalars": {tag: [[step, value], ...]}} (values are the stored
      float32s, exactly).
  tensorboard_oracle.py crc TEXT...
      Prints "CRC <json>": [[crc32c, masked_crc32c], ...] of each TEXT's
      UTF-8 bytes, by tensorboard's implementation.
"""
import json
import os
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.tensorflow_stub import pywrap_tensorflow


def cmd_scalars(directory):
    files = sorted(f for f in os.listdir(directory) if "tfevents" in f)
    acc = event_accumulator.EventAccumulator(directory, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    scalars = {tag: [[e.step, e.value] for e in acc.Scalars(tag)] for tag in acc.Tags()[event_accumulator.SCALARS]}
    # The reader stops quietly at a bad record: read every record once more,
    # so that a CRC or framing error fails the oracle.
    records = 0
    for name in files:
        reader = pywrap_tensorflow.PyRecordReader_New(os.path.join(directory, name))
        while True:
            try:
                reader.GetNext()
            except Exception as e:  # OutOfRangeError at the end; DataLossError on a bad record
                if type(e).__name__ != "OutOfRangeError":
                    raise
                break
            records += 1
    result = {"files": files, "file_version": acc.file_version, "records": records, "scalars": scalars}
    print("SCALARS " + json.dumps(result))


def cmd_crc(texts):
    out = []
    for text in texts:
        data = text.encode()
        out.append([pywrap_tensorflow.crc32c(data), pywrap_tensorflow.masked_crc32c(data)])
    print("CRC " + json.dumps(out))


def main(argv):
    if argv[0] == "scalars":
        cmd_scalars(argv[1])
    elif argv[0] == "crc":
        cmd_crc(argv[1:])
    else:
        raise SystemExit("unknown command " + argv[0])


if __name__ == "__main__":
    main(sys.argv[1:])
