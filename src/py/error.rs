// SPDX-License-Identifier: Apache-2.0
//! The exceptions Python raises where nova's code meets a value it cannot use.
//!
//! nova's callers catch some of these (`except ValueError:` then a default) and let
//! others fail the request; carrying the class lets each caller do what nova's does.

/// The Python exception classes the emulated built-ins can raise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PyExc {
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    RecursionError,
}

impl PyExc {
    pub fn name(self) -> &'static str {
        match self {
            PyExc::ValueError => "ValueError",
            PyExc::TypeError => "TypeError",
            PyExc::KeyError => "KeyError",
            PyExc::IndexError => "IndexError",
            PyExc::AttributeError => "AttributeError",
            PyExc::RecursionError => "RecursionError",
        }
    }
}

/// An exception Python would raise at this point.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", .kind.name())]
pub struct PyError {
    pub kind: PyExc,
    pub message: String,
}

impl PyError {
    pub fn new(kind: PyExc, message: impl Into<String>) -> Self {
        PyError {
            kind,
            message: message.into(),
        }
    }

    pub fn value_error(message: impl Into<String>) -> Self {
        PyError::new(PyExc::ValueError, message)
    }
}
