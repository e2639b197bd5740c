//! Entry point of the gauge firmware: poll the transducer, print levels.

mod sampler;

use crate::sampler::{Reading, Sampler, Source};

/// A fake transducer that replays a tide curve, used on the bench.
struct Bench {
    t: u64,
}

impl Source for Bench {
    fn read(&mut self) -> Option<Reading> {
        self.t += 1000;
        let phase = self.t as f64 / 44_712_000.0 * std::f64::consts::TAU;
        let level = 1.8 + 1.2 * phase.sin();
        Some(Reading { pressure_pa: 101_325.0 + level * 10_052.0, millis: self.t })
    }
}

fn main() {
    let mut sampler = Sampler::new(Bench { t: 0 }, 8, 101_325.0);
    for _ in 0..32 {
        if let Some(level) = sampler.tick() {
            println!("level {:.3} m {{ok}}", level);
        }
    }
}
