//! Sampling of the pressure transducer and conversion to water level.

use std::collections::VecDeque;

/// Density of sea water (kg/m³) times gravity (m/s²), in pascals per metre.
const PA_PER_METRE: f64 = 1025.0 * 9.80665;

/// One reading of the transducer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub pressure_pa: f64,
    pub millis: u64,
}

/// Anything that can produce raw pressure readings.
pub trait Source {
    /// The next reading, or `None` when the sensor did not answer.
    fn read(&mut self) -> Option<Reading>;

    fn name(&self) -> &'static str {
        "transducer"
    }
}

/// Keeps a moving window of readings and reports smoothed water levels.
pub struct Sampler<S: Source> {
    source: S,
    window: VecDeque<Reading>,
    capacity: usize,
    air_pa: f64,
}

impl<S: Source> Sampler<S> {
    /// A sampler averaging over `capacity` readings, using `air_pa` as the
    /// barometric reference for the drift correction.
    pub fn new(source: S, capacity: usize, air_pa: f64) -> Self {
        Sampler { source, window: VecDeque::with_capacity(capacity), capacity, air_pa }
    }

    /// Takes one reading; returns the smoothed level in metres once the window is full.
    pub fn tick(&mut self) -> Option<f64> {
        let reading = self.source.read()?;
        if self.window.len() == self.capacity {
            self.window.pop_front();
        }
        self.window.push_back(reading);
        if self.window.len() < self.capacity {
            return None;
        }
        Some(self.level())
    }

    fn level(&self) -> f64 {
        let sum: f64 = self.window.iter().map(|r| r.pressure_pa).sum();
        let mean = sum / self.window.len() as f64;
        (mean - self.air_pa) / PA_PER_METRE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Constant(f64);

    impl Source for Constant {
        fn read(&mut self) -> Option<Reading> {
            Some(Reading { pressure_pa: self.0, millis: 0 })
        }
    }

    #[test]
    fn still_water_one_metre_deep() {
        let mut s = Sampler::new(Constant(101_325.0 + PA_PER_METRE), 2, 101_325.0);
        assert_eq!(s.tick(), None);
        assert!((s.tick().unwrap() - 1.0).abs() < 1e-9);
    }
}
