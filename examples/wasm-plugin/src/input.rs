// SPDX-License-Identifier: Apache-2.0
//! Reading the ABI 1 input: a header, column descriptors, columns (little-endian).

pub struct Input<'a> {
    bytes: &'a [u8],
    /// Where each column starts, by id (ABI 1's ids are below 128).
    starts: [usize; 128],
}

impl<'a> Input<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        assert!(
            bytes.len() >= 28 && &bytes[..4] == b"NSRS",
            "not an ABI 1 input"
        );
        let mut input = Input {
            bytes,
            starts: [usize::MAX; 128],
        };
        for c in 0..input.u32_at(24) as usize {
            let (id, start) = (input.u32_at(28 + c * 16), input.u32_at(28 + c * 16 + 8));
            if let Some(slot) = input.starts.get_mut(id as usize) {
                *slot = start as usize;
            }
        }
        input
    }

    fn u32_at(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.bytes[at..at + 4].try_into().unwrap())
    }

    pub fn hosts(&self) -> usize {
        self.u32_at(8) as usize
    }

    pub fn aggregates(&self) -> usize {
        self.u32_at(12) as usize
    }

    pub fn request(&self) -> &'a str {
        let (at, len) = (self.u32_at(16) as usize, self.u32_at(20) as usize);
        std::str::from_utf8(&self.bytes[at..at + len]).unwrap_or("{}")
    }

    /// Where column `id` starts.
    fn column(&self, id: u32) -> usize {
        let start = self.starts[id as usize];
        assert!(start != usize::MAX, "a column of ABI 1");
        start
    }

    /// The `n` values of an i64 host column.
    pub fn i64_column(&self, id: u32) -> Vec<i64> {
        let at = self.column(id);
        self.bytes[at..at + self.hosts() * 8]
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    pub fn string(&self, id: u32, row: usize) -> &'a str {
        let at = self.column(id) + row * 8;
        let (start, len) = (self.u32_at(at) as usize, self.u32_at(at + 4) as usize);
        std::str::from_utf8(&self.bytes[start..start + len]).unwrap_or("")
    }

    pub fn list(&self, id: u32, row: usize) -> impl Iterator<Item = u32> + '_ {
        let at = self.column(id) + row * 8;
        let (start, count) = (self.u32_at(at) as usize, self.u32_at(at + 4) as usize);
        (0..count).map(move |k| self.u32_at(start + 4 * k))
    }
}
