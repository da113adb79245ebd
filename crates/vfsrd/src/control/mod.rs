pub mod frames;
