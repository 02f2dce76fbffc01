#!/usr/bin/env node
// The installed CLI runs the compiled code (npm ci / npm install build it through "prepare").
import '../dist/main.js';
