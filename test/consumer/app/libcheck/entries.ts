// Loads every entry point's declarations, for tsconfig.libcheck.json (skipLibCheck false).
import * as Durability from "durability"
import * as DurabilityEffect from "durability/effect"
import * as DurabilityInspector from "durability/inspector"
import * as DurabilityRouting from "durability/routing"
import * as DurabilityTesting from "durability/testing"
import * as DurabilityUtils from "durability/utils"
import * as DurabilityWorkflowEngine from "durability/workflow-engine"

export const entryPoints = [
  Durability,
  DurabilityEffect,
  DurabilityInspector,
  DurabilityRouting,
  DurabilityTesting,
  DurabilityUtils,
  DurabilityWorkflowEngine
] as const
