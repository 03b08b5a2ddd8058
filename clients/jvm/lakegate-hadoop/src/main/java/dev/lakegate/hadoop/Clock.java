package dev.lakegate.hadoop;

/** Time behind one small interface, so the cache's rules are tested with a fake clock. */
public interface Clock {
  /** Monotonic nanoseconds: every deadline of the cache. */
  long monotonicNanos();

  /** Wall-clock epoch milliseconds: compared only with a vended expiry. */
  long nowMillis();

  Clock SYSTEM =
      new Clock() {
        @Override
        public long monotonicNanos() {
          return System.nanoTime();
        }

        @Override
        public long nowMillis() {
          return System.currentTimeMillis();
        }
      };
}
